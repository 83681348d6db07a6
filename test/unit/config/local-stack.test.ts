import { isLocalStackDatabase } from '../../../src/config';

describe('isLocalStackDatabase', () => {
  it('is true only for a loopback host on the stack port', () => {
    expect(isLocalStackDatabase({ host: '127.0.0.1', port: 55432 })).toBe(true);
    expect(isLocalStackDatabase({ host: 'LOCALHOST', port: 55432 })).toBe(true);
    expect(isLocalStackDatabase({ host: '127.0.0.1', port: 5432 })).toBe(false);
    expect(isLocalStackDatabase({ host: 'db.internal', port: 55432 })).toBe(false);
  });
});
