/**
 * The four Debezium guard rails of connector:deploy, each with its reason in the refusal and one
 * override (--force / force: true): decoderbufs, an all_tables publication, snapshot modes that
 * re-publish outbox rows, and a slot without a stored offset. (Deploy-level behaviour on the real
 * stack: test/integration/connector-deploy.test.ts.)
 */
import { loadConfig } from '../../../src/config';
import { buildConnectorConfig, slotGuard, type SlotInfo } from '../../../src/connector';
import { connectorCommands } from '../../../src/cli/connector-commands';
import { thrown } from '../../support/expect-error';

const config = loadConfig({ env: {} });

describe('connector guard rails', () => {
  it.each([
    ['plugin.name', 'decoderbufs', 'decoderbufs is missing on managed services'],
    ['publication.autocreate.mode', 'all_tables', 'all_tables needs superuser'],
    ['snapshot.mode', 'initial', 're-publishes old events'],
    ['snapshot.mode', 'when_needed', 're-publishes old events'],
    ['snapshot.mode', 'always', 're-publishes old events'],
  ])('%s=%s is refused with its reason, and deployed when forced', (key, value, reason) => {
    const error = thrown(() => buildConnectorConfig(config, { extra: { [key]: value } }));
    expect(error.code).toBe('CONNECTOR_UNSAFE');
    expect(error.message).toContain(`${key}=${value}: `);
    expect(error.message).toContain(reason);
    expect(error.message).toContain('--force');
    expect(buildConnectorConfig(config, { extra: { [key]: value }, allowUnsafe: true })[key]).toBe(value);
  });

  it('the defaults are the safe values', () => {
    const built = buildConnectorConfig(config);
    expect(built).toMatchObject({ 'plugin.name': 'pgoutput', 'publication.autocreate.mode': 'disabled', 'snapshot.mode': 'no_data' });
  });

  it('a slot without a stored offset is refused with its reason', () => {
    const slot: SlotInfo = {
      slotName: 's',
      database: 'app',
      plugin: 'pgoutput',
      active: false,
      activePid: null,
      restartLsn: '0/1',
      confirmedFlushLsn: '0/2',
      walStatus: 'reserved',
      retainedWalBytes: 0,
      confirmedLagBytes: 0,
    };
    const [finding] = slotGuard({ slotName: 's', database: 'app', slot, offset: undefined, connector: 'absent' });
    expect(finding?.code).toBe('slot-without-offset');
    expect(finding?.message).toContain('where it would start is unknown');
    expect(finding?.message).toContain("take over another consumer's slot");
  });

  it('connector:deploy offers --force as the one override, and says what it overrides', () => {
    const deploy = connectorCommands().find((c) => c.name() === 'connector:deploy');
    const force = deploy?.options.find((o) => o.long === '--force');
    expect(force?.description).toContain('guard-rail refusals');
    expect(force?.description).toContain('unsafe --set values');
  });
});
