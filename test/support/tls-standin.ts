import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { TLSSocket } from 'node:tls';

/**
 * A stand-in server that only completes TLS handshakes, with the certificate it is given (the secure
 * stack's expired one): what a client sees of a server whose certificate expired, on any hop. With
 * `postgres`, it first answers PostgreSQL's SSLRequest with 'S', as a server does before its handshake.
 */
export async function startTlsStandin(files: { cert: string; key: string }, { postgres = false } = {}): Promise<{ port: number; close(): Promise<void> }> {
  const cert = readFileSync(files.cert);
  const key = readFileSync(files.key);
  const sockets = new Set<Socket>();
  const handshake = (socket: Socket) => {
    const tls = new TLSSocket(socket, { isServer: true, cert, key });
    tls.on('error', () => socket.destroy());
  };
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    if (!postgres) return handshake(socket);
    socket.once('data', () => {
      socket.write('S');
      handshake(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}
