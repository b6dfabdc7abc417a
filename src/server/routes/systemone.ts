/**
 * POST /v1/systemone: the published typed-question wire format. A request with images (or
 * `x-service-route: image`) is answered by the image engine (--image-model); the response's
 * `x-service-route` says which route served it.
 */
import Router from '@koa/router';
import { PipelineResult } from '../../answering/pipeline';
import { answerSystemOne, SystemOneRequest } from '../../answering/systemone';
import { HttpError, ValidationError } from '../../wire/http-error';
import { requestedCacheSalt, requestedDebug, requestedRoute, requestedStateKey } from '../service/request-headers';
import { respondShared } from './respond';
import { Service } from '../service/service';
import { validate } from '../../wire/validation';
import { collectImages, UploadedFile } from '../../images/collect';
import { inPromptOrder, stateWithImages } from '../../answering/image-state';
import { questionNames } from '../../answering/http-errors';
import { inspectImages } from '../../images/inspect';
import { NO_IMAGE_ENGINE } from '../../images/formats';


function readoutOf(r: PipelineResult, names: string[], withHidden: boolean) {
  return Object.fromEntries(
    r.questions.map((q, i) => [
      names[i],
      {
        prompt_token_ids: [...q.prefixTokens, ...q.questionTokens],
        state_token_count: q.stateTokenCount,
        label_token_ids: q.labelIds,
        label_logits: q.labelLogits,
        temperature: q.temperature,
        ...(withHidden ? { hidden: q.hidden } : {}),
      },
    ]),
  );
}

export function systemoneRoute(router: Router, service: Service) {
  router.post('/v1/systemone', async (ctx) => {
    const body = ctx.request.body as SystemOneRequest;
    const problems = validate('systemone', body);
    if (problems.length) throw new ValidationError(problems);
    // Images in any of the three forms, checked (count, size, format, header) before anything else.
    const uploads: UploadedFile[] = ctx.state.uploads ?? [];
    const { images, problems: unreadable } = collectImages(body, uploads);
    if (unreadable.length) throw new ValidationError(unreadable);
    const imageProblems = images.length || uploads.length ? await inspectImages(images) : [];
    if (imageProblems.length) throw new ValidationError(imageProblems);
    // The route: as the header asks, else image for a request with images.
    const route = requestedRoute(ctx) ?? (images.length ? 'image' : 'text');
    if (route === 'image' && !service.images) throw new HttpError(400, NO_IMAGE_ENGINE);
    if (route === 'text' && images.length) throw new HttpError(400, `x-service-route: text cannot answer a request with images (${images.length}): the image route answers it`);
    const debug = service.debugReadout ? requestedDebug(ctx) : undefined;
    const names = Object.keys(body.questions);
    const ordered = inPromptOrder(images);
    const context = route === 'image' ? service.images!.context : service;
    const request = route === 'image' ? { ...body, state: stateWithImages(body.state, images) } : body;
    const cacheSalt = requestedCacheSalt(ctx, service.cacheSaltHeader);
    const errorNames = { ...questionNames((i) => names[i % names.length]), image: (i: number) => ordered[i] };
    await respondShared(ctx, service, { route, debug, cacheSalt, names: errorNames }, async (cancel) => {
      const { result, response } = await answerSystemOne(context, request, { wantHidden: debug === 'hidden', cancel, images: ordered.map((i) => i.bytes), cacheSalt, stateKey: requestedStateKey(ctx) });
      return { body: { ...response, ...(debug ? { readout: readoutOf(result, names, debug === 'hidden') } : {}) }, result };
    });
  });
}
