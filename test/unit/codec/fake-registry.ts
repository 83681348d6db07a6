import type { Type } from 'avsc';
import { parseAvroType } from '../../../src/codec/logical-types';
import { errorCode, writerSchemaFailure } from '../../../src/codec/registry-errors';
import type { RegistryConnection } from '../../../src/codec';

/** An in-memory stand-in for the registry: ids per distinct schema text (like Apicurio's contentIds). */
export interface FakeRegistry extends RegistryConnection {
  calls: string[];
  subjects: Map<string, { id: number; text: string }[]>;
  /** What `isCompatible` answers (the real registry's verdict is tested in integration). */
  compatible: boolean;
  level: string;
  /**
   * When set, `writerType` answers as the real connection does when `GET /schemas/ids/{id}` gets this
   * HTTP status and body (404 with error_code 40403: the id is unknown).
   */
  schemaAnswer?: { status: number; body?: unknown };
}

export function fakeRegistry(firstId = 41): FakeRegistry {
  const ids = new Map<string, number>();
  const texts = new Map<number, string>();
  let next = firstId;
  const idOf = (text: string) => {
    let id = ids.get(text);
    if (id === undefined) {
      id = next++;
      ids.set(text, id);
      texts.set(id, text);
    }
    return id;
  };
  const fake: FakeRegistry = {
    url: 'http://fake-registry/apis/ccompat/v7',
    calls: [],
    subjects: new Map(),
    compatible: true,
    level: 'BACKWARD',
    async lookup(subject, text) {
      fake.calls.push(`lookup ${subject}`);
      const versions = fake.subjects.get(subject) ?? [];
      const i = versions.findIndex((v) => v.text === text);
      return i < 0 ? undefined : { id: versions[i]!.id, version: i + 1 };
    },
    async latest(subject) {
      fake.calls.push(`latest ${subject}`);
      const versions = fake.subjects.get(subject) ?? [];
      const last = versions[versions.length - 1];
      return last ? { id: last.id, version: versions.length, schema: last.text } : undefined;
    },
    async versions(subject) {
      fake.calls.push(`versions ${subject}`);
      return (fake.subjects.get(subject) ?? []).map((v, i) => ({ id: v.id, version: i + 1, schema: v.text }));
    },
    async compatibilityLevel(subject) {
      return fake.subjects.has(subject) ? fake.level : undefined;
    },
    async isCompatible(subject) {
      fake.calls.push(`compatible ${subject}`);
      return fake.compatible;
    },
    async register(subject, text) {
      fake.calls.push(`register ${subject}`);
      const versions = fake.subjects.get(subject) ?? [];
      const found = versions.find((v) => v.text === text);
      if (found) return found.id;
      const id = idOf(text);
      fake.subjects.set(subject, [...versions, { id, text }]);
      return id;
    },
    async writerType(id): Promise<Type | undefined> {
      fake.calls.push(`schema ${id}`);
      const answer = fake.schemaAnswer;
      if (answer && answer.status === 404 && errorCode(answer.body) === 40403) return undefined;
      if (answer) throw writerSchemaFailure(fake.url, id, answer.status, answer.body);
      const text = texts.get(id);
      return text === undefined ? undefined : parseAvroType(JSON.parse(text));
    },
  };
  return fake;
}
