import { createEmitter } from '../../../src/service';

function fakeLogger() {
  const lines: Array<[string, Record<string, unknown>, string]> = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) => void lines.push([level, obj, msg]);
  return { lines, logger: { trace: at('trace'), debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } as never };
}

describe('createEmitter', () => {
  it('a listener that throws neither breaks the emit nor keeps the others from the event', () => {
    const seen: string[] = [];
    const events = createEmitter<'a.x'>({
      listeners: [
        () => {
          throw new Error('observer bug');
        },
        (name) => void seen.push(name),
      ],
    });
    expect(() => events.emit('a.x', {})).not.toThrow();
    expect(seen).toEqual(['a.x']);
  });

  it('logs each event once at the level of its table (fixed or from its data), debug when unlisted', () => {
    const { lines, logger } = fakeLogger();
    const events = createEmitter<'a.warn' | 'a.data' | 'a.other'>({ logger, levels: { 'a.warn': 'warn', 'a.data': (d) => (d.n === 0 ? 'trace' : 'info') } });
    events.emit('a.warn', { k: 1 });
    events.emit('a.data', { n: 0 });
    events.emit('a.data', { n: 2 });
    events.emit('a.other', {});
    expect(lines).toEqual([
      ['warn', { event: 'a.warn', k: 1 }, 'a.warn'],
      ['trace', { event: 'a.data', n: 0 }, 'a.data'],
      ['info', { event: 'a.data', n: 2 }, 'a.data'],
      ['debug', { event: 'a.other' }, 'a.other'],
    ]);
  });

  it('a throwing logger is contained too; on() adds and its result removes a listener', () => {
    const broken = { debug: () => { throw new Error('stream closed'); } } as never;
    const events = createEmitter<'a.x'>({ logger: broken });
    const seen: number[] = [];
    const off = events.on(() => void seen.push(1));
    events.emit('a.x', {});
    off();
    events.emit('a.x', {});
    expect(seen).toEqual([1]);
  });
});
