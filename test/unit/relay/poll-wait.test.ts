import { nextPollWait } from '../../../src/relay/poll-wait';

const settings = { minPollIntervalMs: 5, pollIntervalMs: 100 };

describe('nextPollWait: how long a relay shard waits before its next claim', () => {
  it('goes again at once after a full batch', () => {
    expect(nextPollWait(100, { claimed: 500, full: true }, settings)).toBe(0);
  });

  it('polls again after minPollIntervalMs once a claim found rows, not after the idle poll interval', () => {
    // The old loop slept pollIntervalMs after every batch that was not full: at 1,000 events/s a row waited up to 100 ms.
    expect(nextPollWait(100, { claimed: 3, full: false }, settings)).toBe(5);
  });

  it('doubles on each empty claim, up to pollIntervalMs', () => {
    const waits: number[] = [];
    let wait = nextPollWait(100, { claimed: 1, full: false }, settings);
    for (let i = 0; i < 7; i++) waits.push((wait = nextPollWait(wait, { claimed: 0, full: false }, settings)));
    expect(waits).toEqual([10, 20, 40, 80, 100, 100, 100]);
  });

  it('an idle shard stays at pollIntervalMs', () => {
    expect(nextPollWait(100, { claimed: 0, full: false }, settings)).toBe(100);
  });

  it('minPollIntervalMs 0 goes again at once after rows and starts the doubling at 1 ms', () => {
    const eager = { minPollIntervalMs: 0, pollIntervalMs: 100 };
    expect(nextPollWait(100, { claimed: 2, full: false }, eager)).toBe(0);
    expect(nextPollWait(0, { claimed: 0, full: false }, eager)).toBe(1);
    expect(nextPollWait(1, { claimed: 0, full: false }, eager)).toBe(2);
  });

  it('never waits longer than pollIntervalMs, even when minPollIntervalMs is set above it', () => {
    expect(nextPollWait(100, { claimed: 2, full: false }, { minPollIntervalMs: 500, pollIntervalMs: 50 })).toBe(50);
    expect(nextPollWait(50, { claimed: 0, full: false }, { minPollIntervalMs: 500, pollIntervalMs: 50 })).toBe(50);
  });
});
