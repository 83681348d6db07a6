/**
 * activeController reads the KRaft leader from the brokers' quorum-state files while Kafka is deleting
 * partition folders beside them (`<topic>-<n>.<id>-delete`): the cluster chaos run failed with ENOENT when
 * it walked into one that vanished mid-walk.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { activeController } from '../../../scripts/chaos/cluster-faults';

describe('activeController', () => {
  let stateDir: string;
  beforeEach(() => {
    stateDir = mkdtempSync(join(tmpdir(), 'outbox-quorum-'));
    const quorum = (node: number, leaderId: number, leaderEpoch: number) => {
      const dir = join(stateDir, `kafka-${node}-data`, '__cluster_metadata-0');
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'quorum-state'), JSON.stringify({ leaderId, leaderEpoch, votedId: -1, data_version: 1 }));
    };
    quorum(1, 1, 4);
    quorum(2, 3, 6); // the newest election: node 3
    quorum(3, 3, 5);
    mkdirSync(join(stateDir, 'postgres'));
  });
  afterEach(() => rmSync(stateDir, { recursive: true, force: true }));

  it('names the leader of the newest epoch', () => {
    expect(activeController(stateDir)).toEqual({ nodeId: 3, epoch: 6 });
  });

  it('no leader when no broker recorded one', () => {
    rmSync(join(stateDir, 'kafka-2-data'), { recursive: true });
    rmSync(join(stateDir, 'kafka-3-data'), { recursive: true });
    writeFileSync(join(stateDir, 'kafka-1-data', '__cluster_metadata-0', 'quorum-state'), '{"leaderId":-1,"leaderEpoch":9}');
    expect(activeController(stateDir)).toBeUndefined();
  });

  it('does not fail while partition folders are created and deleted beside the quorum state', async () => {
    // Another process plays the broker: topic partition folders, each with segment files, made and removed
    // as fast as it can, as Kafka does after a topic deletion.
    const data = join(stateDir, 'kafka-1-data');
    const churn = spawn(process.execPath, ['-e', `
      const fs = require('node:fs'), path = require('node:path');
      for (let i = 0; ; i += 1) {
        const dir = path.join(${JSON.stringify(data)}, 'topic-' + (i % 40) + '.x-delete', 'sub');
        fs.mkdirSync(dir, { recursive: true });
        fs.writeFileSync(path.join(dir, '00.log'), '');
        fs.rmSync(path.dirname(dir), { recursive: true, force: true });
      }`], { stdio: 'ignore' });
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      const deadline = Date.now() + 2_000;
      let reads = 0;
      while (Date.now() < deadline) {
        expect(activeController(stateDir)).toEqual({ nodeId: 3, epoch: 6 });
        reads += 1;
      }
      expect(reads).toBeGreaterThan(100);
    } finally {
      churn.kill('SIGKILL');
    }
  });
});
