/** What the answering pipeline needs from an engine: the child-process client in the server, the addon itself in `decide`. */

export interface EngineCall {
  /** With images: one image pad token per image, where it stands (the image engine's). */
  state: readonly number[];
  /** The request's images as sent (compressed), in the order of their pad tokens: decoded in the image engine's process. */
  images?: Uint8Array[];
  questions: { tokens: readonly number[]; labelIds: number[] }[];
  wantHidden?: boolean;
  /** A tenant's cache salt (docs/operations.md): its state shares cached work only with requests of the same salt. */
  cacheSalt?: string;
  /** The client's `X-State-Key`: with several engines, which one a state's requests go to (server/engine-process/group.ts). */
  stateKey?: string;
}

export interface EngineReply {
  answers: { labelLogits: Float32Array; hidden?: Float32Array }[];
  /** The state's tokens as the engine computed them (with images, each image's tokens counted). */
  stateTokens: number;
  /** State tokens that came from the prefix cache. */
  cachedTokens: number;
  /** Which of several serving engines answered (server/engine-process/group.ts); absent where there is one. */
  engine?: number;
  /** Tokens the forward pass computed, for the whole batch this request was in (shared text counted once). */
  computedTokens: number;
  timing: {
    stateMs: number;
    questionsMs: number;
    readoutMs: number;
    /** The engine call, from taking the engine to its result. */
    engineMs: number;
    /** From reaching the engine until it took the request. */
    waitMs: number;
    /**
     * The engine-process hop: from the server sending the call to its reply arriving, less the
     * engine process's accounted time (decode, wait, engine); both ways' messages, their
     * (de)serialization and each process waking. 0 where the engine runs in-process (`decide`).
     */
    hopMs?: number;
    /** Decoding and resizing the call's images (the image engine's process), before it queued. */
    decodeMs?: number;
    /**
     * The engine's host work before the call's steps ran (inside engineMs): the requests checked and packed, the prefix
     * looked up, the steps and their attention planned, their arrays moved to the device. On a GPU a lone call waits for it.
     */
    planMs?: number;
    /** A state-boundary registration was queued or running when the request arrived. */
    waitedBehindRegistration: boolean;
    /** Requests merged into the forward pass that answered this one (1: alone). */
    batchSize?: number;
    /**
     * The engine launched this call while the one before it was still unfinished (--calls-in-flight 2): its host work
     * overlapped that call's device work, and its engineMs includes the rest of that call.
     */
    overlapped?: boolean;
  };
}

/** The call was cancelled before the engine took it: every client waiting for it had gone. */
export class ClientGoneError extends Error {
  constructor() {
    super('the client went away before the engine took the request');
  }
}

/** An engine's refusal, as it crosses a process boundary: its stable code, message and figures. */
export interface WireError {
  code: string;
  message: string;
  details: Record<string, number>;
}

/** The engine refused the call (an engine error with its code). */
export class EngineCallError extends Error {
  constructor(readonly wire: WireError) {
    super(wire.message);
  }
}

/** The engine's process died: this call and every later one fail. */
export class EngineDeadError extends Error {}

export interface EngineLike {
  /** The longest prompt (state + one question) in tokens, as the engine reports it. */
  readonly contextLimit: number;
  /** `cancel` aborting before the engine takes the call drops it: the promise rejects with ClientGoneError. */
  answer(call: EngineCall, cancel?: AbortSignal): Promise<EngineReply>;
}
