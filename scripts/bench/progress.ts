import { MultiBar, Presets } from 'cli-progress';
import type { Logger } from 'outbox-router/log';

export interface Phase {
  update(done: number, info?: Record<string, string | number>): void;
  done(): void;
}

/** Bars on a terminal; one log line per second per phase otherwise (CI logs, pipes). */
export interface Progress {
  phase(name: string, total: number, unit: string): Phase;
  /** A result line that must not garble the bars. */
  note(message: string): void;
  stop(): void;
}

const infoText = (info?: Record<string, string | number>) =>
  info ? Object.entries(info).map(([k, v]) => `${k} ${v}`).join(', ') : '';

export function createProgress(options: { tty: boolean; log: Logger; stream?: NodeJS.WritableStream }): Progress {
  if (!options.tty) {
    return {
      phase(name, total, unit) {
        let last = 0;
        let value = 0;
        let logged = -1;
        const line = (info?: Record<string, string | number>) => {
          logged = value;
          options.log.info(`${name}: ${value}/${total} ${unit}${info ? `; ${infoText(info)}` : ''}`);
        };
        return {
          update(done, info) {
            value = done;
            if (Date.now() - last >= 1000) {
              last = Date.now();
              line(info);
            }
          },
          done() {
            if (logged !== value) line();
          },
        };
      },
      note: (message) => options.log.info(message),
      stop() {},
    };
  }
  const bars = new MultiBar(
    {
      format: '{name} [{bar}] {value}/{total} {unit} {info}',
      hideCursor: true,
      clearOnComplete: false,
      stopOnComplete: false,
      barsize: 30,
      fps: 5,
      stream: options.stream ?? process.stderr,
    },
    Presets.shades_classic,
  );
  return {
    phase(name, total, unit) {
      const bar = bars.create(Math.max(1, total), 0, { name: name.padEnd(28), unit, info: '' });
      return {
        update(done, info) {
          bar.update(Math.min(done, Math.max(1, total)), { info: infoText(info) });
        },
        done() {
          bar.stop();
        },
      };
    },
    note: (message) => bars.log(`${message}\n`),
    stop: () => bars.stop(),
  };
}
