import { RecentIds, REPLAY_DEDUP_IDS } from '../../../src/router/replay';

describe('RecentIds (the --all replay dedup)', () => {
  it('remembers the last `capacity` ids added and forgets the oldest first', () => {
    const ids = new RecentIds(3);
    for (const id of ['a', 'b', 'c']) ids.add(id);
    expect(['a', 'b', 'c'].map((id) => ids.has(id))).toEqual([true, true, true]);
    ids.add('d');
    expect(ids.has('a')).toBe(false);
    expect(['b', 'c', 'd'].map((id) => ids.has(id))).toEqual([true, true, true]);
    expect(ids.size).toBe(3);
  });

  it('stays bounded whatever goes through it', () => {
    const ids = new RecentIds(REPLAY_DEDUP_IDS);
    for (let i = 0; i < REPLAY_DEDUP_IDS * 3; i++) ids.add(`id-${i}`);
    expect(ids.size).toBe(REPLAY_DEDUP_IDS);
    expect(ids.has(`id-${REPLAY_DEDUP_IDS * 3 - 1}`)).toBe(true);
    expect(ids.has('id-0')).toBe(false);
  });
});
