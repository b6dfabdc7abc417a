/**
 * The package's library entry (package.json `main`): the engine, for programs that answer
 * pre-tokenized questions without the server (docs/engine.md), and the server and decide entry points.
 */
export { Engine } from './engine/engine';
export type { Dtype, IsaLevel, NativeAnswerRequest, NativeAnswerResult, NativeEngineInfo, EngineError, EngineErrorCode } from './engine/native';
export { isEngineError } from './engine/native';
export { serve } from './server/main';
export { decide } from './cli/decide';
