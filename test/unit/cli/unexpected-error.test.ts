/**
 * src/cli/run-command.ts: the CLI boundary. Whatever a command's body throws leaves as one paragraph
 * naming an error code and exit code 1; an error without a code (a bug) is INTERNAL, with no stack.
 */
import { Command } from 'commander';
import { action } from '../../../src/cli/run-command';
import { OutboxError } from '../../../src/errors';
import * as log from '../../../src/log';

describe('action(): what a failing command prints', () => {
  let stderr: jest.SpyInstance;
  let exitCode: typeof process.exitCode;
  beforeEach(() => {
    exitCode = process.exitCode;
    process.exitCode = undefined;
    stderr = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
  });
  afterEach(() => {
    stderr.mockRestore();
    process.exitCode = exitCode;
  });
  const written = () => stderr.mock.calls.map((c) => String(c[0])).join('');

  it('a plain TypeError becomes INTERNAL in the one-paragraph form, without a stack, and exit code 1', async () => {
    await action(async () => {
      throw new TypeError('boom');
    })();
    expect(written()).toBe('outbox: unexpected failure, please report it: boom\n(error code INTERNAL; see docs/errors.md)\n');
    expect(process.exitCode).toBe(1);
  });

  it('the stack of an error without a code goes to the debug log (--log-level debug), for the bug report', async () => {
    const debug = jest.fn();
    const createLogger = jest.spyOn(log, 'createLogger').mockReturnValue({ debug } as never);
    const bug = new TypeError('boom');
    try {
      const command = new Command('x').option('--log-level <level>');
      command.action(
        action(async () => {
          throw bug;
        }),
      );
      await command.parseAsync(['--log-level', 'debug'], { from: 'user' });
      expect(createLogger).toHaveBeenCalledWith(expect.objectContaining({ level: 'debug' }));
    } finally {
      createLogger.mockRestore();
    }
    expect(process.exitCode).toBe(1);
    expect(written()).toBe('outbox: unexpected failure, please report it: boom\n(error code INTERNAL; see docs/errors.md)\n');
    expect(debug).toHaveBeenCalledWith({ err: bug }, expect.any(String));
  });

  it('an OutboxError prints its message and code', async () => {
    await action(async () => {
      throw new OutboxError('FLAG_INVALID', '--lanes must be at least 1, got 0.');
    })();
    expect(written()).toBe('outbox: --lanes must be at least 1, got 0.\n(error code FLAG_INVALID; see docs/errors.md)\n');
    expect(process.exitCode).toBe(1);
  });

  it('a failed write names the file and the fix, as before', async () => {
    await action(async () => {
      throw Object.assign(new Error('EROFS: read-only file system'), { code: 'EROFS', path: '/ro/stack' });
    })();
    expect(written()).toBe('outbox: cannot write /ro/stack (EROFS). Make it writable, free disk space, or point OUTBOX_STACK_DIR / OUTBOX_CACHE_DIR elsewhere.\n');
    expect(process.exitCode).toBe(1);
  });

  it('a body that succeeds sets its own exit code, or 0', async () => {
    await action(async () => 2)();
    expect(process.exitCode).toBe(2);
    await action(async () => undefined)();
    expect(process.exitCode).toBe(0);
    expect(written()).toBe('');
  });
});
