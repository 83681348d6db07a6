#!/usr/bin/env node
/**
 * On demand (not in CI): `dlq:replay` over millions of dead letters under a 512 MB heap. Produces
 * LETTERS small dead letters (default 3,000,000) straight to a fresh dead-letter topic with kafkajs in
 * batches, runs the built CLI (`dist/cli/main.js dlq:replay --all --dry-run --json`) under
 * `node --max-old-space-size=512`, and samples its peak RSS (VmHWM) while it runs. Prints one JSON line:
 * letters, replayed lines read, exit code, peak RSS, seconds. Deletes the topic afterwards.
 *
 *   npm run -s build && node build/scripts/soak/dlq-replay-memory.js
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Kafka, logLevel } from 'kafkajs';

const LETTERS = Number(process.env.LETTERS ?? 3_000_000);
/** Letters per produce request: ~120 bytes each, under the broker's 1 MB request limit. */
const BATCH = 5_000;
const root = join(__dirname, '..', '..', '..');

function peakRss(pid: number): number {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmHWM:'));
    return Number(line?.match(/(\d+)/)?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

async function main(): Promise<void> {
  const kafka = new Kafka({ clientId: 'dlq-replay-memory', brokers: [process.env.OUTBOX_KAFKA_BROKERS ?? '127.0.0.1:9092'], logLevel: logLevel.NOTHING });
  const topic = `memory${randomUUID().slice(0, 8)}.outbox.dlq.order`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  try {
    await measure(kafka, topic);
  } finally {
    await admin.deleteTopics({ topics: [topic] }).catch(() => {});
    await admin.disconnect();
  }
}

async function measure(kafka: Kafka, topic: string): Promise<void> {
  const producer = kafka.producer();
  await producer.connect();
  const produceStart = Date.now();
  for (let sent = 0; sent < LETTERS; sent += BATCH) {
    const n = Math.min(BATCH, LETTERS - sent);
    await producer.send({
      topic,
      acks: 1,
      messages: Array.from({ length: n }, (_, i) => ({ key: `k${(sent + i) % 10_000}`, value: 'v', headers: { id: randomUUID(), 'x-original-topic': 'memory.outbox.event.order', 'x-consumer': 'memory' } })),
    });
  }
  await producer.disconnect();
  const produceSeconds = (Date.now() - produceStart) / 1000;

  const started = Date.now();
  const child = spawn(process.execPath, ['--max-old-space-size=512', join(root, 'dist/cli/main.js'), 'dlq:replay', '--topic', topic, '--consumer', 'memory', '--all', '--beyond-horizon', '--dry-run', '--json', '--timeout-ms', '120000'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, peakRss(child.pid ?? 0))), 200);
  let lines = 0;
  let last = '';
  createInterface({ input: child.stdout }).on('line', (line) => {
    lines++;
    last = line;
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearInterval(sampler);
  const report = JSON.parse(last || '{}') as { replayed?: number; sample?: unknown[] };
  process.stdout.write(
    `${JSON.stringify({ letters: LETTERS, produceSeconds, exitCode: code, lines, replayed: report.replayed, sample: report.sample?.length, peakRssMB: Math.round(peak / 2 ** 20), seconds: (Date.now() - started) / 1000 })}\n`,
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`${String((error as Error).stack ?? error)}\n`);
  process.exitCode = 1;
});
