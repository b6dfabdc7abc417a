/**
 * Loaded into every test file by bench/suite/cpu.ts (jest's setupFilesAfterEnv): appends when this worker
 * began and ended the file, so that the sampler can give the worker's CPU to the file it ran.
 */
const fs = require('fs');
const log = process.env.TQ_SUITE_WINDOWS;
const file = expect.getState().testPath;
const mark = (what) => fs.appendFileSync(log, `${JSON.stringify({ pid: process.pid, file, what, ms: Date.now() })}\n`);
mark('start');
afterAll(() => mark('end'));
