/** llama.cpp (node-llama-cpp's prebuilt CPU binary) as the peer engine, fed the same token ids. */
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, Token } from 'node-llama-cpp';

// node-llama-cpp is ESM-only; TypeScript's CommonJS output would turn a plain
// `import()` into `require()`, so the import is kept dynamic at run time.
const importEsm = new Function('specifier', 'return import(specifier)') as (s: string) => Promise<typeof import('node-llama-cpp')>;

export class LlamaCppPeer {
  private constructor(private llama: Llama, private model: LlamaModel, private context: LlamaContext, private sequence: LlamaContextSequence) {}

  static async open(ggufPath: string, options: { threads: number; contextSize: number; batchSize: number }): Promise<LlamaCppPeer> {
    const { getLlama } = await importEsm('node-llama-cpp');
    const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' as any });
    const model = await llama.loadModel({ modelPath: ggufPath, gpuLayers: 0 });
    const context = await model.createContext({ contextSize: options.contextSize, batchSize: options.batchSize, threads: options.threads, sequences: 1 });
    return new LlamaCppPeer(llama, model, context, context.getSequence());
  }

  /**
   * Evaluates `tokens` from an empty sequence; returns the labels' log-probabilities at the last token
   * (logits up to a shared constant: node-llama-cpp 3.21 returns probabilities, not logits) and the time.
   */
  async prefill(tokens: number[], labelIds: number[]): Promise<{ ms: number; labelLogits: number[] }> {
    const seq = this.sequence;
    await seq.clearHistory();
    {
      const input = tokens.map((t, i) =>
        i === tokens.length - 1 ? ([t as Token, { generateNext: { probabilities: true } }] as const) : (t as Token),
      );
      const t0 = performance.now();
      const out = await seq.controlledEvaluate(input as any);
      const ms = performance.now() - t0;
      const probs = out[tokens.length - 1]!.next.probabilities!;
      return { ms, labelLogits: labelIds.map((id) => Math.log(probs.get(id as Token) ?? 0)) };
    }
  }

  async close() {
    await this.context.dispose();
    await this.model.dispose();
    await this.llama.dispose();
  }
}

/**
 * llama.cpp's prefill of `tokens` to the labels at the last one: one warm-up, then the median of `runs`, with its
 * best practice on the CPU (batch 1024, the default F16 KV cache). Also the label probabilities, to compare with.
 */
export async function timePeerPrefill(gguf: string, tokens: number[], labelIds: number[], o: { threads: number; runs: number }) {
  const peer = await LlamaCppPeer.open(gguf, { threads: o.threads, contextSize: 2048, batchSize: 1024 });
  await peer.prefill(tokens, labelIds);
  const runs: { ms: number; labelLogits: number[] }[] = [];
  for (let i = 0; i < o.runs; i++) runs.push(await peer.prefill(tokens, labelIds));
  await peer.close();
  const ms = [...runs.map((r) => r.ms)].sort((a, b) => a - b)[Math.floor(runs.length / 2)];
  const max = Math.max(...runs[0].labelLogits);
  const e = runs[0].labelLogits.map((l) => Math.exp(l - max)), sum = e.reduce((a, b) => a + b, 0);
  return { ms, probs: e.map((x) => x / sum) };
}
