import type { Logger } from '../log';

export type EventLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
export type EventListener<N extends string> = (name: N, data: Record<string, unknown>) => void;

/** The level an event is logged at: fixed, or chosen from its data. Events not listed log at debug. */
export type EventLevels<N extends string> = Partial<Record<N, EventLevel | ((data: Record<string, unknown>) => EventLevel)>>;

export interface Emitter<N extends string> {
  /** Logs the event (`{ event: name, ...data }`, message `name`) and hands it to every listener. */
  emit(name: N, data: Record<string, unknown>): void;
  /** Adds a listener (metrics, tests); returns a function that removes it. */
  on(listener: EventListener<N>): () => void;
}

export interface EmitterOptions<N extends string> {
  /** Without one, events go to the listeners only. */
  logger?: Logger;
  levels?: EventLevels<N>;
  listeners?: ReadonlyArray<EventListener<N> | undefined>;
}

/**
 * The one event emitter of the services: typed names, one level rule (the `levels` table, else debug),
 * and listeners that cannot break the service: a listener that throws is skipped, the others still run.
 */
export function createEmitter<N extends string>(options: EmitterOptions<N> = {}): Emitter<N> {
  const listeners = new Set<EventListener<N>>(options.listeners?.filter((l): l is EventListener<N> => typeof l === 'function'));
  const levelOf = (name: N, data: Record<string, unknown>): EventLevel => {
    const level = options.levels?.[name];
    return typeof level === 'function' ? level(data) : (level ?? 'debug');
  };
  return {
    emit(name, data) {
      if (options.logger) {
        try {
          options.logger[levelOf(name, data)]({ event: name, ...data }, name);
        } catch {
          // A broken log stream never breaks the service.
        }
      }
      for (const listener of listeners) {
        try {
          listener(name, data);
        } catch {
          // Observers never break the service.
        }
      }
    },
    on(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  };
}
