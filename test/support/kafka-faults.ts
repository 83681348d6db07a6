import net from 'node:net';
import type { ISocketFactory } from 'kafkajs';

/**
 * A broker outage for ONE kafkajs client, without touching the shared broker: pass `socketFactory`
 * through createKafka's `overrides`. `cut()` destroys every open connection of that client and makes
 * new ones fail with ECONNREFUSED; `restore()` lets connections through again.
 */
export interface KafkaFaults {
  socketFactory: ISocketFactory;
  cut(): void;
  restore(): void;
  /** Connection attempts refused while cut. */
  readonly refused: number;
  readonly isCut: boolean;
}

export function createKafkaFaults(): KafkaFaults {
  let cut = false;
  let refused = 0;
  const open = new Set<net.Socket>();
  const socketFactory: ISocketFactory = ({ host, port, ssl, onConnect }) => {
    if (ssl) throw new Error('kafka-faults: TLS connections are not supported by this test helper');
    if (cut) {
      refused++;
      const socket = new net.Socket();
      const error = Object.assign(new Error(`connect ECONNREFUSED ${host}:${port} (injected outage)`), { code: 'ECONNREFUSED', errno: -111, syscall: 'connect' });
      process.nextTick(() => socket.destroy(error));
      return socket;
    }
    const socket = net.connect({ host, port }, onConnect);
    socket.setKeepAlive(true, 60_000);
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    return socket;
  };
  return {
    socketFactory,
    cut() {
      cut = true;
      for (const socket of open) socket.destroy(Object.assign(new Error('connection reset (injected outage)'), { code: 'ECONNRESET' }));
      open.clear();
    },
    restore() {
      cut = false;
    },
    get refused() {
      return refused;
    },
    get isCut() {
      return cut;
    },
  };
}
