/** Engine failures as HTTP errors. */
import { HttpError } from '../wire/http-error';
import { PromptTooLongError, RenderError } from '../rendering/renderer';
import { ClientGoneError, EngineCallError, EngineDeadError } from './engine-like';
import { ImagePlacementError } from './image-state';

/** The 422 for a prompt longer than the context; `count` is "N tokens" or "at least N tokens (...)". */
function tooLong(question: string, count: string, contextLimit: number): HttpError {
  return new HttpError(422, `the rendered prompt of question ${JSON.stringify(question)} is longer than the context: ${count}, the context holds ${contextLimit} (the context as the inference engine reports it)`);
}

/** `questionName(i)` names the i-th question the engine was asked. */
export function toHttpError(e: unknown, questionName: (i: number) => string): unknown {
  if (e instanceof RenderError) return new HttpError(400, e.message);
  if (e instanceof ImagePlacementError) return new HttpError(422, e.message);
  // Passed on as it is: the in-flight layer (../inflight.ts) counts it, and may run the call again.
  if (e instanceof ClientGoneError) return e;
  if (e instanceof PromptTooLongError) {
    const count = e.exact ? `${e.tokens} tokens` : `at least ${e.tokens} tokens (${e.bytes} bytes of text, refused before tokenizing)`;
    return tooLong(questionName(e.question), count, e.contextLimit);
  }
  if (e instanceof EngineDeadError) return new HttpError(503, e.message);
  const wire = e instanceof EngineCallError ? e.wire : (e as { code?: string; message?: string; details?: Record<string, number> });
  if (wire && typeof wire.code === 'string') {
    // The image engine could not decode an image whose header read (the main route names which).
    if (wire.code === 'IMAGE_UNREADABLE') return new HttpError(422, `image ${(wire.details?.image ?? 0) + 1} of the request cannot be decoded: ${wire.message}`);
    if (wire.code === 'CONTEXT_OVERFLOW') {
      const d = wire.details ?? {};
      return tooLong(questionName(d.question ?? 0), `${d.promptTokens} tokens`, d.contextLimit);
    }
    return new HttpError(400, `the engine cannot answer: ${wire.message}`);
  }
  return e;
}
