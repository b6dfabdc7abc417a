/** A small typed wrapper over the native engine: open, answer, close. */
import { loadAddon, NativeAnswerRequest, NativeAnswerResult, NativeEngine, NativeEngineInfo, NativeImage, NativeLoadOptions, TokenIds } from './native';

export class Engine {
  private constructor(private readonly native: NativeEngine, private current: NativeEngineInfo) {}

  /** What the engine runs; its kernels and levelChoice change when remeasureLevel moves to another level. */
  get info(): NativeEngineInfo {
    return this.current;
  }

  static async open(options: NativeLoadOptions): Promise<Engine> {
    const { NativeEngine } = loadAddon();
    const native = new NativeEngine();
    try {
      return new Engine(native, await native.load(options));
    } catch (e) {
      await native.close();
      throw e;
    }
  }

  async answer(request: NativeAnswerRequest): Promise<NativeAnswerResult> {
    return (await this.native.answerBatch([request]))[0];
  }

  answerBatch(requests: NativeAnswerRequest[]): Promise<NativeAnswerResult[]> {
    return this.native.answerBatch(requests);
  }

  /** Full-vocabulary logits per position as rows, for reference checks. */
  async logitsAll(tokens: TokenIds, images?: NativeImage[]): Promise<Float32Array[]> {
    const { logits, vocabSize } = await this.native.logitsAll(tokens, images);
    const rows: Float32Array[] = [];
    for (let i = 0; i < logits.length; i += vocabSize) rows.push(logits.subarray(i, i + vocabSize));
    return rows;
  }

  registerBoundary(ticket: number): Promise<boolean> {
    return this.native.registerBoundary(ticket);
  }

  cacheStats() {
    return this.native.cacheStats();
  }

  visionCacheStats() {
    return this.native.visionCacheStats();
  }

  /** Both caches' counters as the last answered call left them, read at once; undefined before the first call. */
  cachesAfterLastCall() {
    return this.native.cachesAfterLastCall();
  }

  memoryStats() {
    return this.native.memoryStats();
  }

  /**
   * Measures the CPU kernels' levels again, between calls, and moves to the fastest if a trusted measurement
   * finds another one (docs/engine.md, "Which level runs"): the answers stay the same bits. Nothing to do where
   * the level was forced, only one runs, or the kernels are not the engine's own. Returns the new info.
   */
  async remeasureLevel(): Promise<NativeEngineInfo> {
    this.current = await this.native.remeasureLevel();
    return this.current;
  }

  /**
   * How long, after each call, the engine's thread spins for the next one before it sleeps: a call that finds it
   * asleep waits for it to wake (csrc/addon/engine_thread.h). For a machine whose cores are to spare (a GPU's host).
   */
  setBusyPoll(ms: number): void {
    this.native.setBusyPoll(ms);
  }

  /** How many times the engine's thread has slept with nothing to do (each time, the next call waited for it to wake). */
  threadSleeps(): number {
    return this.native.threadSleeps();
  }

  /** How many calls the engine's thread launched while the call before was still unfinished (their host and device work overlapped). */
  callsOverlapped(): number {
    return this.native.callsOverlapped();
  }

  close(): Promise<void> {
    return this.native.close();
  }
}
