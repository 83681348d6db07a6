/**
 * An OpenTelemetry SDK for tests only: a BasicTracerProvider exporting to memory, registered globally
 * with an AsyncLocalStorage context manager (what an application's NodeSDK does), and undone after.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

export interface TestTracing {
  exporter: InMemorySpanExporter;
  /** The finished spans, in the order they ended. */
  spans(): ReadableSpan[];
  /** The parent span id of a span ('' for a root). */
  parentOf(span: ReadableSpan): string;
  shutdown(): Promise<void>;
}

export function registerTestTracing(): TestTracing {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  trace.setGlobalTracerProvider(provider);
  return {
    exporter,
    spans: () => exporter.getFinishedSpans(),
    parentOf: (span) => span.parentSpanContext?.spanId ?? '',
    async shutdown() {
      await provider.shutdown();
      trace.disable();
      context.disable();
    },
  };
}
