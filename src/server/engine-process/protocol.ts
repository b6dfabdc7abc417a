/** Messages between the server and its engine process (channel.ts: shared memory, or Node IPC with advanced serialization). */
import { NativeCacheStats, NativeEngineInfo, NativeLoadOptions, NativeMemoryStats, NativeVisionCacheStats } from '../../engine/native';
import { EngineCall, EngineReply, WireError } from '../../answering/engine-like';
import { PixelBudget } from '../../images/preprocess';
import { Family } from '../../common/prom-text';

/** State-boundary registrations (--register-boundary after), counted by the engine process. */
export interface BoundaryCounters {
  /** Queued to run next, after the reply that produced them. */
  pending: number;
  /** Queued behind requests that were already waiting, so those did not wait behind a registration. */
  deferred: number;
  registered: number;
  /** Given up: their blocks were needed by a request before they ran. */
  dropped: number;
  failed: number;
}

export interface CacheReport {
  stats: NativeCacheStats;
  /** The vision-tower output cache (an image engine). */
  vision?: NativeVisionCacheStats;
  boundaries: BoundaryCounters;
  /** What the engine keeps besides weights and KV cache, and the engine process's resident memory. */
  memory: NativeMemoryStats & { rssBytes: number; jsHeapBytes: number };
}

/** Answered at once, never queued behind the engine: what /metrics reads of an engine process. */
export interface MetricsReport {
  /** The engine process's own default metrics (prom-client's JSON form). */
  process: Family[];
  /** Answer calls waiting for the engine (decoded, queued), and whether one is running. */
  queued: number;
  running: boolean;
  /** Merged calls the engine launched while the one before was still unfinished (--calls-in-flight 2). */
  overlapped: number;
  /** The caches' counters as of the end of the last call (read on the engine thread then, not now). */
  stats?: NativeCacheStats;
  vision?: NativeVisionCacheStats;
  boundaries: BoundaryCounters;
}

export type HostMessage =
  | { kind: 'ready'; info: NativeEngineInfo }
  /** The engine's info changed (a re-measured level): the server's copy takes it. */
  | { kind: 'info'; info: NativeEngineInfo }
  | { kind: 'fatal'; error: WireError }
  | { kind: 'reply'; id: number; reply: EngineReply }
  | { kind: 'error'; id: number; error: WireError }
  | { kind: 'cache'; id: number; report: CacheReport }
  | { kind: 'metrics'; id: number; report: MetricsReport }
  /** An answer call taken off the queue by a `cancel` before the engine started it. */
  | { kind: 'dropped'; id: number };

/**
 * An answer call as it crosses to the engine process: its token ids as Int32Arrays, which the IPC's serialization
 * copies as one block each way (an array of numbers it writes and reads number by number: about 4x the time).
 */
export type WireCall = Omit<EngineCall, 'state' | 'questions'> & { state: Int32Array; questions: { tokens: Int32Array; labelIds: Int32Array }[] };

export function toWireCall(call: EngineCall): WireCall {
  return { ...call, state: Int32Array.from(call.state), questions: call.questions.map((q) => ({ tokens: Int32Array.from(q.tokens), labelIds: Int32Array.from(q.labelIds) })) };
}

/** `cancel` drops a queued answer call; one the engine has started runs to its reply. */
export type ServerMessage =
  | { kind: 'answer'; id: number; call: WireCall }
  | { kind: 'cache'; id: number }
  | { kind: 'metrics'; id: number }
  | { kind: 'cancel'; id: number };

export interface HostArgs {
  load: NativeLoadOptions;
  /** An image engine: the recipe's pixel budget, and the model named in image keys. */
  images?: { budget: PixelBudget; model: string };
  /** Largest merged call, in tokens; a single larger request still runs alone. */
  batchTokens: number;
  /** How long each side spins on the channel after a message (channel.ts); 0 never. */
  busyPollMs: number;
  /** Merged calls handed to the engine at once (--calls-in-flight): 2 lets it launch the next while the device runs one. */
  callsInFlight: 1 | 2;
  /** The channel's shared memory, an inherited fd (set by EngineClient.start); absent: messages over IPC alone. */
  channelFd?: number;
}

/** The engine process's fd of the channel's shared memory: the stdio slot after the IPC pipe. */
export const CHANNEL_FD = 4;
