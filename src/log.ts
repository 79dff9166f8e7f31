import pino, { type DestinationStream, type Logger } from 'pino';

/** `numeric`: pino's own lines ("level":30, "time" in epoch ms); `named`: "level":"info", ISO 8601 "time". */
export const LOG_FORMATS = ['numeric', 'named'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/**
 * JSON lines on stdout (or `destination`). Admission objects are never logged whole: a Secret's
 * data or a token must not reach a log, so the redaction list is a second guard, not the first.
 * Errors are logged as `{ err }`; the serializer drops the HTTP responses client errors carry.
 * pino's numeric levels stay the default (existing pipelines parse them); `named` is for those
 * that expect level names and ISO times.
 */
export function createLogger(level: string, destination?: DestinationStream, format: LogFormat = 'numeric'): Logger {
  const options = {
    level,
    base: { name: 'workload-identity-webhook' },
    redact: { paths: ['token', 'data', 'stringData', '*.token', '*.data', '*.stringData'], censor: '[redacted]' },
    serializers: { err: serializeError },
    ...(format === 'named' && {
      formatters: { level: (label: string) => ({ level: label }) },
      timestamp: pino.stdTimeFunctions.isoTime,
    }),
  };
  return pino(options, destination ?? batchedDestination(1));
}

/** The message of the decision line logged for each admission (admission/handler.ts). */
export const DECISION_MESSAGE = 'admission';

/** Decision lines are written this many bytes at a time (about a hundred lines). */
export const BATCH_BYTES = 32 * 1024;
const BATCH_MS = 250;
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

/**
 * A file descriptor (stdout) written asynchronously and in batches. A decision line per admission
 * at 1,000 reviews/s would otherwise be a write each, a tenth of the server's CPU, and a blocking
 * one would stall admission behind a slow reader of the pipe. Decision lines go out 32 KB at a
 * time, or 250 ms after the first of them waited (at 4 KB a time the writes took a fifth of
 * `serve`'s main thread under bench:peers' load, at 32 KB 7 %: docs/figures.md); any other line
 * (start-up, certificates, warnings) goes out at once, with what is buffered before it. The timer
 * is armed by a line that waits, not left running (sonic-boom's periodicFlush): an idle process is
 * not woken 4 times a second for nothing. pino flushes what is left when the process exits;
 * beyond 8 MiB buffered (a reader that stopped reading) lines are dropped rather than held in memory.
 */
export function batchedDestination(fd: number, periodMs = BATCH_MS): DestinationStream {
  const out = pino.destination({
    dest: fd,
    sync: false,
    minLength: BATCH_BYTES,
    // sonic-boom's own chunk (16 KB by default) must be larger than the batch.
    maxWrite: 2 * BATCH_BYTES,
    maxLength: MAX_BUFFERED_BYTES,
  });
  const decision = `"msg":"${DECISION_MESSAGE}"}\n`;
  let afterWrite = false;
  let timer: NodeJS.Timeout | undefined;
  const now = () => {
    // Everything buffered goes now: a timer armed for waiting lines has nothing left to do.
    clearTimeout(timer);
    timer = undefined;
    out.flush(); // at once, unless a write is under way: then when it is done
    if (afterWrite) return;
    afterWrite = true;
    out.once('drain', () => {
      afterWrite = false;
      out.flush();
    });
  };
  const later = () => {
    if (timer) return;
    timer = setTimeout(now, periodMs);
    timer.unref();
  };
  return {
    write(line: string) {
      out.write(line);
      if (line.endsWith(decision)) later();
      else now();
    },
    flush: (cb?: (err?: Error) => void) => out.flush(cb),
    flushSync: () => out.flushSync(),
  } as DestinationStream;
}

/** pino's error serializer, over `loggableError`. */
function serializeError(err: unknown): unknown {
  return pino.stdSerializers.err(loggableError(err) as Error);
}

/** The error's message as it may be shown: an API response is reduced to its status and the Status message. */
export function safeMessage(err: unknown): string {
  const loggable = loggableError(err);
  return typeof loggable === 'object' &&
    loggable !== null &&
    'message' in loggable &&
    typeof loggable.message === 'string'
    ? loggable.message
    : String(err);
}

/** Fields in which HTTP clients keep the response: client-node's ApiException has `body` and `headers`. */
const RESPONSE_FIELDS = new Set(['body', 'headers', 'response']);
const MAX_CAUSES = 8;

/**
 * The error as it may be logged. client-node's ApiException keeps the response body and headers
 * as fields and writes both into its message and stack; a body can be any object the API server
 * (or a proxy) sent back, a Secret included. Such an error is logged as its status and the API
 * server's message only; an error caused by one gets the same treatment of its cause.
 */
function loggableError(err: unknown, depth = 0): unknown {
  if (typeof err !== 'object' || err === null || !('message' in err) || typeof err.message !== 'string') return err;
  const e = err as Error & Record<string, unknown>;
  const cause = depth < MAX_CAUSES ? loggableError(e.cause, depth + 1) : undefined;
  // AggregateError: pino serializes each of `errors` too.
  const given = Array.isArray(e.errors) ? (e.errors as unknown[]) : undefined;
  const errors = given?.map((inner) => loggableError(inner, depth + 1));
  const response = Object.keys(e).some((key) => RESPONSE_FIELDS.has(key));
  if (!response && cause === e.cause && (!errors || errors.every((inner, i) => inner === given?.[i]))) return err;
  const copy = Object.create(Object.getPrototypeOf(e)) as Record<string, unknown>;
  for (const [key, value] of Object.entries(e)) if (!RESPONSE_FIELDS.has(key)) copy[key] = value;
  if (errors) copy.errors = errors;
  copy.message = response ? responseSummary(e) : e.message;
  copy.stack = response ? `${e.name}: ${copy.message}${frames(e.stack)}` : e.stack;
  if (e.cause !== undefined) copy.cause = cause;
  return copy;
}

/** "HTTP 404 NotFound: secrets "x" not found": the status and the API server's Status message. */
function responseSummary(e: Record<string, unknown>): string {
  const code = typeof e.code === 'number' ? e.code : e.statusCode;
  let body = e.body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      body = undefined;
    }
  }
  const status = (typeof body === 'object' && body !== null ? body : {}) as { reason?: unknown; message?: unknown };
  const reason = typeof status.reason === 'string' ? ` ${status.reason}` : '';
  const message = typeof status.message === 'string' ? status.message : 'the response body is not logged';
  return `HTTP ${code ?? '(no status)'}${reason}: ${message}`;
}

/** The call-site lines of a stack, without the message it starts with (which may span lines). */
function frames(stack: unknown): string {
  if (typeof stack !== 'string') return '';
  const at = stack.search(/\n\s+at /);
  return at === -1 ? '' : stack.slice(at);
}
