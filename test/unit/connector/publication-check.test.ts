/** src/connector/publication-check.ts: what counts as a publication that no longer publishes outbox inserts. */
import { judgePublication } from '../../../src/connector/publication-check';

const target = { publication: 'outbox_publication', schema: 'public', table: 'outbox' };
const row = (over: Partial<{ pubinsert: boolean; puballtables: boolean; table_published: boolean; rowfilter: string | null }> = {}) => ({
  pubinsert: true,
  puballtables: false,
  table_published: true,
  rowfilter: null,
  ...over,
});

describe('judgePublication', () => {
  it('is ok when inserts of the table are published, including through FOR ALL TABLES', () => {
    expect(judgePublication(target, row())).toMatchObject({ ok: true, exists: true, problems: [] });
    expect(judgePublication(target, row({ puballtables: true }))).toMatchObject({ ok: true, puballtables: true });
  });

  it('names each way inserts stop being decoded', () => {
    expect(judgePublication(target, undefined)).toMatchObject({ ok: false, exists: false, problems: ['publication "outbox_publication" does not exist, so nothing is decoded'] });
    expect(judgePublication(target, row({ pubinsert: false })).problems).toEqual([expect.stringMatching(/does not publish inserts \(pubinsert = false/)]);
    expect(judgePublication(target, row({ table_published: false })).problems).toEqual([expect.stringMatching(/does not publish the outbox table public\.outbox/)]);
    expect(judgePublication(target, row({ rowfilter: "(aggregate_type = 'order'::text)" })).problems).toEqual([expect.stringMatching(/only WHERE \(aggregate_type = 'order'::text\)/)]);
    expect(judgePublication(target, row({ pubinsert: false, table_published: false })).problems).toHaveLength(2);
  });
});
