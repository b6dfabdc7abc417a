/** POST /v1/systemone: the published typed-question wire format. */
import Router from '@koa/router';
import { PipelineResult } from '../../answering/pipeline';
import { answerSystemOne, SystemOneRequest } from '../../answering/systemone';
import { HttpError, ValidationError } from '../http-error';
import { requestedDebug, requestedRoute } from '../request-headers';
import { respondShared } from './respond';
import { Service } from '../service';
import { validate } from '../validation';
import { collectImages, UploadedFile } from '../../images/collect';
import { inspectImages } from '../../images/inspect';
import { NO_IMAGE_ENGINE } from '../../images/formats';


function readoutOf(r: PipelineResult, names: string[], withHidden: boolean) {
  return Object.fromEntries(
    r.questions.map((q, i) => [
      names[i],
      {
        prompt_token_ids: q.promptTokens,
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
    if (requestedRoute(ctx) === 'image' || images.length > 0) throw new HttpError(400, NO_IMAGE_ENGINE);
    const debug = service.debugReadout ? requestedDebug(ctx) : undefined;
    const names = Object.keys(body.questions);
    await respondShared(ctx, service, debug, (i) => names[i % names.length], async (cancel) => {
      const { result, response } = await answerSystemOne(service, body, { wantHidden: debug === 'hidden', cancel });
      return { body: { ...response, ...(debug ? { readout: readoutOf(result, names, debug === 'hidden') } : {}) }, result };
    });
  });
}
