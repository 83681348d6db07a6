/** src/codec/registry-errors.ts: which registry failures are retriable, and what the messages tell. */
import { fromClientError, fromRegistryStatus, splitCredentials, writerSchemaFailure } from '../../../src/codec/registry-errors';
import { createRegistryConnection } from '../../../src/codec';

const URL_ = 'http://127.0.0.1:8081/apis/ccompat/v7';

describe('registry error classification', () => {
  it('treats 5xx as a retriable outage', () => {
    const error = fromRegistryStatus(URL_, 'fetching schema id 3', 'GET /schemas/ids/3', 503, { message: 'busy' });
    expect([error.code, error.retriable]).toEqual(['REGISTRY_UNAVAILABLE', true]);
    expect(error.message).toContain('HTTP 503 (busy)');
  });

  it('names the credential settings on 401/403, retriable: a refused credential is no reason to dead-letter a record', () => {
    for (const [status, code] of [[401, 'REGISTRY_AUTH_FAILED'], [403, 'REGISTRY_ACCESS_DENIED']] as const) {
      const error = fromRegistryStatus(URL_, 'x', 'GET /x', status, undefined);
      expect([error.code, error.retriable]).toEqual([code, true]);
      expect(error.message).toContain('OUTBOX_REGISTRY_USERNAME');
    }
  });

  it('treats 429 (rate limited) as a retriable outage', () => {
    const error = fromRegistryStatus(URL_, 'fetching schema id 3', 'GET /schemas/ids/3', 429, { message: 'slow down' });
    expect([error.code, error.retriable]).toEqual(['REGISTRY_UNAVAILABLE', true]);
    expect(error.message).toContain('HTTP 429 (rate limited) (slow down)');
  });

  it('makes every failure to fetch a writer schema retriable, keeping its code and message', () => {
    const wrongPath = writerSchemaFailure('http://127.0.0.1:8081', 7, 404, { title: 'RESTEASY003210: Could not find resource' });
    expect([wrongPath.code, wrongPath.retriable]).toEqual(['REGISTRY_REQUEST_FAILED', true]);
    expect(wrongPath.message).toContain('/apis/ccompat/v7');
  });

  it('recognises a 404 that is not the Confluent API (wrong base path)', () => {
    const error = fromRegistryStatus('http://127.0.0.1:8081', 'x', 'GET /subjects/s/versions/latest', 404, { title: 'RESTEASY003210: Could not find resource' });
    expect(error.code).toBe('REGISTRY_REQUEST_FAILED');
    expect(error.message).toContain('/apis/ccompat/v7');
  });

  it('recognises the client reporting a refused connection as "status 400"', () => {
    const clientError = Object.assign(new Error('Confluent_Schema_Registry - Error, status 400: connect ECONNREFUSED 127.0.0.1:1'), { status: 400 });
    const error = fromClientError(URL_, 'registering', 'POST /subjects/s/versions', clientError);
    expect([error.code, error.retriable]).toEqual(['REGISTRY_UNAVAILABLE', true]);
    expect(error.message).toContain('connect ECONNREFUSED');
    const badRequest = fromClientError(URL_, 'registering', 'POST /subjects/s/versions', Object.assign(new Error('x - Invalid schema'), { status: 422 }));
    expect([badRequest.code, badRequest.retriable]).toEqual(['REGISTRY_REQUEST_FAILED', false]);
  });

  it('takes credentials out of a URL so they are never printed', () => {
    expect(splitCredentials('http://bob:s3cr%40t@reg:8081/apis/ccompat/v7/')).toEqual({ url: 'http://reg:8081/apis/ccompat/v7', username: 'bob', password: 's3cr@t' });
    expect(splitCredentials(URL_)).toEqual({ url: URL_ });
    expect(createRegistryConnection({ url: 'http://bob:hunter2@reg:8081/apis/ccompat/v7' }).url).toBe('http://reg:8081/apis/ccompat/v7');
  });
});
