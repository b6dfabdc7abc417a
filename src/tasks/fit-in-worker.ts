/**
 * Fits a task in a worker thread of its own, so that /v1/systemone keeps answering while a
 * registration fits (a fit of 1,000 examples with 77 options takes tens of seconds on 2 cores: bench/README.md,
 * "Task fitting").
 * The worker runs as its caller does: TypeScript under ts-node, or compiled (common/sibling-module.ts).
 */
import { siblingModule } from '../common/sibling-module';
import { Worker } from 'worker_threads';
import { FitInput, FitOutput } from './fit/record';

export function fitInWorker(input: FitInput): Promise<FitOutput> {
  const fitWorker = siblingModule(__filename, 'fit-worker');
  const worker = new Worker(fitWorker.file, { execArgv: fitWorker.execArgv });
  return new Promise<FitOutput>((resolve, reject) => {
    worker.once('message', (m: { ok?: FitOutput; error?: string }) => (m.ok ? resolve(m.ok) : reject(new Error(`task fitting failed: ${m.error}`))));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`task fitting worker exited with code ${code}`)));
    worker.postMessage(input);
  }).finally(() => worker.terminate());
}
