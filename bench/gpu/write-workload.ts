/**
 * The GPU serving benchmark's states and question (bench/workload.ts) as JSON, for bench/gpu/serve-load.mjs, which
 * runs on the GPU machine without TypeScript: bundle.sh writes it into the bundle, serve.sh beside a run without one.
 *   node -r ts-node/register/transpile-only bench/gpu/write-workload.ts OUT.json [STATES]      (STATES: 400)
 */
import * as fs from 'fs';
import { dossier, topicQuestion } from '../workload';

const [file, count = '400'] = process.argv.slice(2);
const states = Array.from({ length: Number(count) }, (_, i) => dossier(i));
fs.writeFileSync(file, JSON.stringify({ states, question: topicQuestion(1) }));
