/** Which base image scripts/docker builds for a Dockerfile: read from its FROM lines, never guessed. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { dockerfileBase, NODE_RELEASES } from '../../../scripts/docker/base-image';
import { PROJECT_ROOT } from '../../../scripts/stack/paths';

describe('dockerfileBase', () => {
  it("finds the repository Dockerfile's one base, a Node line the script has a release for", () => {
    const { tag, major } = dockerfileBase(readFileSync(join(PROJECT_ROOT, 'Dockerfile'), 'utf8'));
    expect(tag).toBe(`node:${major}-bookworm-slim`);
    expect(NODE_RELEASES[major]).toMatch(new RegExp(`^${major}\\.\\d+\\.\\d+$`));
  });

  it('skips stages that build FROM an earlier stage', () => {
    expect(dockerfileBase('FROM node:22-bookworm-slim AS build\nRUN x\nFROM build AS test\nFROM node:22-bookworm-slim\n')).toEqual({ tag: 'node:22-bookworm-slim', major: '22' });
  });

  it('refuses two different bases, another distribution or an unknown Node line, naming what it read', () => {
    expect(() => dockerfileBase('FROM node:22-bookworm-slim AS a\nFROM node:24-bookworm-slim\n')).toThrow(/node:22-bookworm-slim.*node:24-bookworm-slim/);
    expect(() => dockerfileBase('FROM node:24-alpine\n')).toThrow(/node:24-alpine.*node:<major>-bookworm-slim/);
    expect(() => dockerfileBase('FROM node:18-bookworm-slim\n')).toThrow(/Node 18.*Node 22 or 24/);
    expect(() => dockerfileBase('RUN true\n')).toThrow(/FROM \[\]/);
  });
});
