/**
 * scripts/stack/template.ts, and the real templates in connect/ rendered with the values the stack passes
 * (renderConfigs in scripts/stack/stack.ts, initPostgres in scripts/stack/postgres.ts).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { exactlyOnceSourceFor, jvmTemplateValues } from '../../../scripts/stack/stack';
import { PROJECT_ROOT, stackPaths } from '../../../scripts/stack/paths';
import { KAFKA, POSTGRES, STACK_HOST, STACK_PORTS } from '../../../scripts/stack/settings';
import { parseProperties, renderTemplate, renderTemplateFile } from '../../../scripts/stack/template';
import { thrown } from '../../support/expect-error';


describe('renderTemplate', () => {
  it('fills every placeholder, repeated ones included, and leaves the rest of the text alone', () => {
    expect(renderTemplate('a=${x}\nb=${y}:${x}\n', { x: 'one', y: 2 })).toBe('a=one\nb=2:one\n');
  });

  it('renders numbers, 0 and the empty string as values, not as missing', () => {
    expect(renderTemplate('[${zero}][${empty}][${n}]', { zero: 0, empty: '', n: 55432 })).toBe('[0][][55432]');
  });

  it('inserts values literally, even ones that look like replacement patterns', () => {
    expect(renderTemplate('v=${v}', { v: '$& $1 $$ ${other}' })).toBe('v=$& $1 $$ ${other}');
  });

  it('leaves a text without placeholders unchanged', () => {
    const text = '# plain\nkey=value\n';
    expect(renderTemplate(text, {})).toBe(text);
  });

  it('throws TEMPLATE_VALUE_MISSING naming the missing key, the source and the known keys', () => {
    const error = thrown(() => renderTemplate('a=${present}\nb=${missingKey}\n', { present: 1, other: 2 }, 'kafka.properties'));
    expect(error.code).toBe('TEMPLATE_VALUE_MISSING');
    expect(error.message).toContain('${missingKey}');
    expect(error.message).toContain('kafka.properties');
    expect(error.message).toContain('present');
    expect(error.message).toContain('other');
  });

  it('throws for a placeholder whose name is an Object.prototype member', () => {
    // Regression test, fixed (scripts/stack/template.ts): `values[key]` also finds inherited members, so `${constructor}` or
    // `${toString}` with no such value renders "function Object() { [native code] }" instead of throwing.
    // Fix: look up with Object.hasOwn(values, key).
    expect(thrown(() => renderTemplate('a=${constructor}', {})).code).toBe('TEMPLATE_VALUE_MISSING');
    expect(thrown(() => renderTemplate('a=${toString}', { x: 1 })).message).toContain('${toString}');
  });

  it('renderTemplateFile reads the file and names its path in the error', () => {
    const dir = mkdtempSync(join(tmpdir(), 'outbox-template-'));
    try {
      const file = join(dir, 'x.properties');
      writeFileSync(file, 'port=${port}\nhost=${host}\n');
      expect(renderTemplateFile(file, { port: 1, host: 'h' })).toBe('port=1\nhost=h\n');
      const error = thrown(() => renderTemplateFile(file, { port: 1 }));
      expect(error.code).toBe('TEMPLATE_VALUE_MISSING');
      expect(error.message).toContain(file);
      expect(error.message).toContain('${host}');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('parseProperties', () => {
  it('skips comments (# and !) and blank lines', () => {
    const props = parseProperties('# a=1\n! b=2\n\n   \n  # c=3\nd=4\n');
    expect(props).toEqual({ d: '4' });
  });

  it('accepts = and : as separators and trims around them', () => {
    expect(parseProperties('a=1\nb:2\n  c = 3  \nd : 4\n')).toEqual({ a: '1', b: '2', c: '3', d: '4' });
  });

  it('splits at the first separator, so values keep their = and :', () => {
    const props = parseProperties(
      'config.providers.file.class=org.Foo\nsasl=a=b=c\nlisteners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\nurl: http://h:1/p?q=1\n',
    );
    expect(props['sasl']).toBe('a=b=c');
    expect(props['listeners']).toBe('PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093');
    expect(props['url']).toBe('http://h:1/p?q=1');
    expect(props['config.providers.file.class']).toBe('org.Foo');
  });

  it('handles CRLF line endings, empty values, and a later line overriding an earlier one', () => {
    expect(parseProperties('a=1\r\nb=\r\na=2\r\n')).toEqual({ a: '2', b: '' });
  });

  it('ignores lines with no separator', () => {
    expect(parseProperties('justaword\nk=v\n')).toEqual({ k: 'v' });
  });
});

describe('the real templates in connect/', () => {
  const connectDir = join(PROJECT_ROOT, 'connect');
  const paths = stackPaths('/tmp/outbox-template-test/state', '/tmp/outbox-template-test/cache');
  /** The values renderConfigs() in scripts/stack/stack.ts passes. */
  const jvmValues = jvmTemplateValues(paths);
  const socketDir = '/tmp/outbox-template-test/postgres/run';
  /** The values initPostgres() in scripts/stack/postgres.ts passes. */
  const postgresValues = {
    host: STACK_HOST,
    postgresPort: STACK_PORTS.postgres,
    socketDir,
    walLevel: POSTGRES.walLevel,
    maxReplicationSlots: POSTGRES.maxReplicationSlots,
    maxWalSenders: POSTGRES.maxWalSenders,
    maxConnections: POSTGRES.maxConnections,
  };
  const render = (name: string, values: Record<string, string | number>) => renderTemplateFile(join(connectDir, name), values);
  const codeLines = (text: string) => text.split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#'));

  it('connect/ is found through PROJECT_ROOT', () => {
    expect(readFileSync(join(connectDir, 'kafka-server.properties'), 'utf8')).toContain('process.roles');
  });

  describe.each(['kafka-server.properties', 'connect-distributed.properties', 'log4j2.properties'])('%s', (name) => {
    it('renders with the stack values and leaves no placeholder in any setting', () => {
      const text = render(name, jvmValues);
      for (const line of codeLines(text)) expect(line).not.toContain('${');
      // Comments may mention `${...}` or Connect's `${env:NAME}`, but no name-like placeholder survives,
      // including ones renderTemplate would not recognise (with `_` or `.`) and so would leave silently.
      expect(text.match(/\$\{[A-Za-z_][A-Za-z0-9_.]*\}/g) ?? []).toEqual([]);
    });
  });

  it('exactly.once.source.support sticks: asked for wins, else the rendered config\'s, else disabled', () => {
    const dir = mkdtempSync(join(tmpdir(), 'outbox-eos-'));
    try {
      expect(exactlyOnceSourceFor({}, { configDir: dir })).toBe('disabled');
      writeFileSync(join(dir, 'connect-distributed.properties'), render('connect-distributed.properties', jvmTemplateValues(paths, { exactlyOnceSource: 'enabled' })));
      expect(exactlyOnceSourceFor({}, { configDir: dir })).toBe('enabled');
      expect(exactlyOnceSourceFor({ exactlyOnceSource: 'disabled' }, { configDir: dir })).toBe('disabled');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('connect-distributed.properties: exactly.once.source.support disabled by default, enabled on request', () => {
    expect(parseProperties(render('connect-distributed.properties', jvmValues))['exactly.once.source.support']).toBe('disabled');
    const enabled = jvmTemplateValues(paths, { exactlyOnceSource: 'enabled' });
    expect(parseProperties(render('connect-distributed.properties', enabled))['exactly.once.source.support']).toBe('enabled');
  });

  it('kafka-server.properties: one KRaft node on 127.0.0.1:9092 with its controller on 9093, replication factor 1', () => {
    const props = parseProperties(render('kafka-server.properties', jvmValues));
    expect(props['process.roles']).toBe('broker,controller');
    expect(props['controller.quorum.voters']).toBe(`${props['node.id']}@127.0.0.1:9093`);
    expect(props['listeners']).toBe('PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093');
    expect(props['advertised.listeners']).toBe('PLAINTEXT://127.0.0.1:9092');
    expect(props['controller.listener.names']).toBe('CONTROLLER');
    expect(props['log.dirs']).toBe(paths.kafkaDataDir);
    expect(isAbsolute(props['log.dirs'] ?? '')).toBe(true);
    expect(props['offsets.topic.replication.factor']).toBe('1');
    expect(props['transaction.state.log.replication.factor']).toBe('1');
    expect(props['transaction.state.log.min.isr']).toBe('1');
    expect(props['share.coordinator.state.topic.replication.factor']).toBe('1');
  });

  it('connect-distributed.properties: the local broker, our plugin path, single-broker storage topics, env and file providers', () => {
    const props = parseProperties(render('connect-distributed.properties', jvmValues));
    expect(props['bootstrap.servers']).toBe('127.0.0.1:9092');
    expect(props['group.id']).toBe(KAFKA.connectGroupId);
    expect(props['plugin.path']).toBe(jvmValues.pluginPath);
    expect(props['listeners']).toBe('http://127.0.0.1:8083');
    expect(props['rest.advertised.port']).toBe('8083');
    expect(props['config.storage.topic']).toBe(KAFKA.connectConfigTopic);
    expect(props['offset.storage.topic']).toBe(KAFKA.connectOffsetTopic);
    expect(props['status.storage.topic']).toBe(KAFKA.connectStatusTopic);
    for (const store of ['config', 'offset', 'status']) expect(props[`${store}.storage.replication.factor`]).toBe('1');
    expect(props['scheduled.rebalance.max.delay.ms']).toBe('0');
    const providers = (props['config.providers'] ?? '').split(',').map((p) => p.trim());
    expect(providers).toEqual(expect.arrayContaining(['env', 'file']));
    for (const p of providers) expect(props[`config.providers.${p}.class`]).toMatch(/^org\.apache\.kafka\.common\.config\.provider\./);
  });

  it('connect-distributed.properties: Connect talks to the broker the Kafka template listens on', () => {
    const kafka = parseProperties(render('kafka-server.properties', jvmValues));
    const connect = parseProperties(render('connect-distributed.properties', jvmValues));
    expect(kafka['advertised.listeners']).toBe(`PLAINTEXT://${connect['bootstrap.servers']}`);
  });

  it('connect-distributed.properties: plugin.path really is the value passed in', () => {
    const props = parseProperties(render('connect-distributed.properties', { ...jvmValues, pluginPath: '/somewhere/else/plugins' }));
    expect(props['plugin.path']).toBe('/somewhere/else/plugins');
  });

  it('log4j2.properties: the root logger writes to the console appender it declares', () => {
    const props = parseProperties(render('log4j2.properties', jvmValues));
    expect(props['appender.console.type']).toBe('Console');
    expect(props['rootLogger.appenderRef.stdout.ref']).toBe(props['appender.console.name']);
    expect(props['rootLogger.level']).toBe('info');
    expect(props['logger.debezium.name']).toBe('io.debezium');
  });

  it('postgresql.conf: renders with the initPostgres values; logical WAL on 127.0.0.1:55432 with enough slots', () => {
    const text = render('postgresql.conf', postgresValues);
    expect(text).not.toContain('${');
    const conf = parseProperties(text);
    expect(conf['wal_level']).toBe('logical');
    expect(conf['port']).toBe('55432');
    expect(conf['listen_addresses']).toBe("'127.0.0.1'");
    expect(conf['unix_socket_directories']).toBe(`'${socketDir}'`);
    expect(conf['max_replication_slots']).toBe(String(POSTGRES.maxReplicationSlots));
    expect(conf['max_wal_senders']).toBe(String(POSTGRES.maxWalSenders));
    expect(conf['max_connections']).toBe(String(POSTGRES.maxConnections));
  });

  it('postgresql.conf: durability stays on; WAL and checkpoints sized for a commit-heavy load', () => {
    const conf = parseProperties(render('postgresql.conf', postgresValues));
    expect(conf).toMatchObject({ fsync: 'on', synchronous_commit: 'on', wal_buffers: '16MB', max_wal_size: '2GB', checkpoint_timeout: '15min' });
    for (const unsafe of ['full_page_writes', 'wal_sync_method', 'commit_delay']) expect(conf[unsafe]).toBeUndefined();
  });

  it('kafka-server.properties: request threads for 2 cores, and the log flush policy left at Kafka\'s defaults', () => {
    const props = parseProperties(render('kafka-server.properties', jvmValues));
    expect(props).toMatchObject({ 'num.network.threads': '2', 'num.io.threads': '2', 'background.threads': '2' });
    expect(Object.keys(props).filter((k) => k.startsWith('log.flush.'))).toEqual([]);
  });

  it('each template fails loudly when a value the stack passes is missing', () => {
    const { pluginPath: _omit, ...withoutPluginPath } = jvmValues;
    expect(thrown(() => render('connect-distributed.properties', withoutPluginPath)).message).toContain('${pluginPath}');
    const { walLevel: _omit2, ...withoutWal } = postgresValues;
    expect(thrown(() => render('postgresql.conf', withoutWal)).message).toContain('${walLevel}');
  });
});
