/**
 * Token ids of recently tokenized texts, least recently used dropped first, within a byte budget.
 * Tokenizing is a pure function of the text, so a hit is exact. It serves the request path: a
 * client asks about the same state again and again (that is what the prefix cache is for), and
 * tokenizing it again at every request was most of the server's own time (bench/README.md, "Front end").
 */
export class EncodingCache {
  private readonly entries = new Map<string, readonly number[]>();
  private bytes = 0;

  /** budgetBytes: what texts (2 bytes a character, as V8 holds them) and ids (8 bytes each) may take. */
  constructor(readonly budgetBytes: number) {}

  static cost(text: string, ids: readonly number[]): number {
    return 2 * text.length + 8 * ids.length;
  }

  /**
   * The ids of `text`, if held; it becomes the most recently used. Shared by every request that asks, so
   * `readonly`: they are not frozen, as V8 copies a frozen (or sealed) array's elements into an Int32Array,
   * the call's form for the engine process, one by one through its iterator: an order of magnitude
   * slower than a plain array's (bench/README.md, "Front end").
   */
  get(text: string): readonly number[] | undefined {
    const ids = this.entries.get(text);
    if (ids === undefined) return undefined;
    this.entries.delete(text);
    this.entries.set(text, ids);
    return ids;
  }

  /** Keeps `ids` itself, not a copy: the caller hands over an array it no longer changes (tokenizer.ts makes one a text). */
  set(text: string, ids: readonly number[]): void {
    const cost = EncodingCache.cost(text, ids);
    if (cost > this.budgetBytes || this.entries.has(text)) return;
    this.entries.set(text, ids);
    this.bytes += cost;
    for (const [oldest, oldIds] of this.entries) {
      if (this.bytes <= this.budgetBytes) break;
      this.entries.delete(oldest);
      this.bytes -= EncodingCache.cost(oldest, oldIds);
    }
  }

  get size(): number {
    return this.entries.size;
  }

  get heldBytes(): number {
    return this.bytes;
  }
}
