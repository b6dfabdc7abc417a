/** Engine failures as HTTP errors. */
import { HttpError, invalid } from '../wire/http-error';
import { PromptTooLongError, RenderError } from '../rendering/renderer';
import { ClientGoneError, EngineCallError, EngineDeadError } from './engine-like';
import { ImagePlacementError } from './image-state';

/** How errors name what they are about, in the caller's words. */
export interface ErrorNames {
  /** The i-th question the engine was asked: `the rendered prompt of question "q"`, or a task example's own words. */
  prompt(i: number): string;
  /** The i-th image in prompt order, where the request holds it, when the caller knows (the main route). */
  image?(i: number): { loc: (string | number)[]; name: string } | undefined;
}

/** The errors of a request's questions named by their names in the request. */
export function questionNames(name: (i: number) => string): ErrorNames {
  return { prompt: (i) => `the rendered prompt of question ${JSON.stringify(name(i))}` };
}

/** The 422 for a prompt longer than the context; `count` is "N tokens" or "at least N tokens (...)". */
function tooLong(prompt: string, count: string, contextLimit: number): HttpError {
  return new HttpError(422, `${prompt} is longer than the context: ${count}, the context holds ${contextLimit} (the context as the inference engine reports it)`);
}

/** An image the image engine could not decode (its header read), as a 422 naming it where the caller can. */
function undecodable(index: number, message: string, names: ErrorNames): HttpError {
  const image = names.image?.(index);
  if (image) return invalid(image.loc, `${image.name} cannot be decoded: ${message}`);
  return new HttpError(422, `image ${index + 1} of the request cannot be decoded: ${message}`);
}

export function toHttpError(e: unknown, names: ErrorNames): unknown {
  if (e instanceof RenderError) return new HttpError(400, e.message);
  if (e instanceof ImagePlacementError) return new HttpError(422, e.message);
  // Passed on as it is: the in-flight layer (../inflight.ts) counts it, and may run the call again.
  if (e instanceof ClientGoneError) return e;
  if (e instanceof PromptTooLongError) {
    const count = e.exact ? `${e.tokens} tokens` : `at least ${e.tokens} tokens (${e.bytes} bytes of text, refused before tokenizing)`;
    return tooLong(names.prompt(e.question), count, e.contextLimit);
  }
  if (e instanceof EngineDeadError) return new HttpError(503, e.message, { 'Retry-After': '1' });
  const wire = e instanceof EngineCallError ? e.wire : (e as { code?: string; message?: string; details?: Record<string, number> });
  if (wire && typeof wire.code === 'string') {
    if (wire.code === 'IMAGE_UNREADABLE') return undecodable(wire.details?.image ?? 0, wire.message ?? '', names);
    if (wire.code === 'CONTEXT_OVERFLOW') {
      const d = wire.details ?? {};
      return tooLong(names.prompt(d.question ?? 0), `${d.promptTokens} tokens`, d.contextLimit);
    }
    return new HttpError(400, `the engine cannot answer: ${wire.message}`);
  }
  return e;
}
