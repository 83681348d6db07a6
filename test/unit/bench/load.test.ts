import { Accumulator, classifyProcess, cpuBetween, parseMachineStat, parseProcStat, type ProcSample } from '../../../scripts/bench/load';

describe('/proc parsing', () => {
  it('reads utime + stime after a comm with spaces and parentheses', () => {
    const line = '1234 (my (odd) proc) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 1000000 500 18446744073709551615';
    expect(parseProcStat(line)).toEqual({ comm: 'my (odd) proc', ticks: 300, ppid: 1 });
  });

  it('rejects a malformed line', () => {
    expect(parseProcStat('garbage')).toBeUndefined();
  });

  it('machine busy = total minus idle and iowait', () => {
    const stat = 'cpu  100 5 50 800 20 1 2 0 0 0\ncpu0 50 2 25 400 10 0 1 0 0 0\n';
    expect(parseMachineStat(stat)).toEqual({ busy: 158, total: 978 });
  });
});

describe('classifyProcess', () => {
  it('tells the stack apart by command line', () => {
    expect(classifyProcess('java', '/usr/bin/java -cp x org.apache.kafka.connect.cli.ConnectDistributed connect.properties', 1, 99)).toBe('connect');
    expect(classifyProcess('java', '/usr/bin/java -cp x kafka.Kafka server.properties', 2, 99)).toBe('kafka');
    expect(classifyProcess('java', '/usr/bin/java -jar apicurio-registry/quarkus-run.jar', 3, 99)).toBe('registry');
    expect(classifyProcess('postgres', 'postgres: app 127.0.0.1 idle', 4, 99)).toBe('postgres');
    expect(classifyProcess('node', 'node dist/cli/main.js bench', 99, 99)).toBe('benchNode');
    expect(classifyProcess('node', 'node dist/cli/main.js router', 5, 99, new Map([[5, 'router']]))).toBe('router');
    expect(classifyProcess('node', 'node jest', 6, 99)).toBe('otherNode');
    expect(classifyProcess('bash', 'bash', 7, 99)).toBe('other');
  });
});

describe('CPU between samples', () => {
  const sample = (at: number, busy: number, total: number, procs: Array<[number, string, number]>): ProcSample => ({
    at,
    machine: { busy, total },
    procs: new Map(procs.map(([pid, group, ticks]) => [pid, { group, ticks }])),
  });

  it('gives % of one core per group; a process born in between counts from zero', () => {
    const a = sample(0, 0, 0, [[1, 'postgres', 100], [2, 'postgres', 50]]);
    const b = sample(2000, 300, 400, [[1, 'postgres', 250], [2, 'postgres', 100], [3, 'kafka', 40]]);
    const r = cpuBetween(a, b);
    expect(r.seconds).toBe(2);
    expect(r.cpuPct).toEqual({ postgres: 100, kafka: 20 });
  });

  it('keeps the ticks of a process that exits between samples up to its last sample', () => {
    const acc = new Accumulator(sample(0, 0, 0, [[1, 'routerChild', 0]]));
    acc.add(sample(1000, 0, 0, [[1, 'routerChild', 80]]));
    acc.add(sample(2000, 0, 0, []));
    expect(acc.result().cpuPct).toEqual({ routerChild: 40 });
  });
});

describe('classifyProcess with the measured stack scope', () => {
  const scope = { javaPids: new Set([10, 11]), postmasters: new Set([20]), proxy: 40 };
  it('counts only the stack\'s own JVMs and its postmaster with its children', () => {
    expect(classifyProcess('java', '/usr/bin/java -cp x kafka.Kafka server.properties', 10, 99, new Map(), scope)).toBe('kafka');
    // a broker of another profile on the same machine is not the pipeline
    expect(classifyProcess('java', '/usr/bin/java -cp x kafka.Kafka server.properties', 12, 99, new Map(), scope)).toBe('other');
    expect(classifyProcess('postgres', 'postgres -D data', 20, 99, new Map(), scope, 1)).toBe('postgres');
    expect(classifyProcess('postgres', 'postgres: walsender', 21, 99, new Map(), scope, 20)).toBe('postgres');
    // the system's PostgreSQL
    expect(classifyProcess('postgres', 'postgres: checkpointer', 30, 99, new Map(), scope, 29)).toBe('other');
    // the cluster profile's proxy: PostgreSQL's cost, every client goes through it
    expect(classifyProcess('node', 'node build/scripts/stack/pg-proxy.js', 40, 99, new Map(), scope, 1)).toBe('postgres');
  });
});
