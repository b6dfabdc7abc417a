/** POST/GET /v1/abstention/tasks, DELETE /v1/abstention/tasks/{id} (docs/abstention.md). */
import Router from '@koa/router';
import { abstentionSummaryOf } from '../../tasks/abstention/form';
import { fitAbstention, ParsedAbstention } from '../../tasks/abstention/register';
import { NO_IMAGE_ENGINE } from '../../images/formats';
import { inspectImages } from '../../images/inspect';
import { abstainKeyOf, optionSetOf } from '../../tasks/abstention/task';
import { HttpError, Problem, ValidationError } from '../../wire/http-error';
import { requestedCacheSalt } from '../service/request-headers';
import { Service } from '../service/service';
import { parseAbstentionRegistration } from './abstention-body';
import { registrationError } from './task-body';

/** The examples' images checked as the main route checks a request's (count, size, format, header): 422 naming example and image. */
async function refuseBadImages(parsed: ParsedAbstention) {
  const problems: Problem[] = [];
  for (const [i, e] of parsed.examples.entries())
    for (const p of await inspectImages(e.images)) problems.push({ ...p, loc: ['body', 'examples', i, 'request', ...p.loc.slice(1)], msg: `example ${i}: ${p.msg}` });
  if (problems.length) throw new ValidationError(problems);
}

export function abstentionRoutes(router: Router, service: Service) {
  const store = service.tasks;

  router.post('/v1/abstention/tasks', async (ctx) => {
    const parsed = parseAbstentionRegistration(ctx.request.body);
    const cacheSalt = requestedCacheSalt(ctx, service.cacheSaltHeader);
    // An image-route task's examples are read by the image engine, as the image route answers.
    const imageRoute = parsed.match === 'imajev_extension';
    try {
      store.refuseAbstentionHeld({ id: parsed.id, match: parsed.match, match_key: optionSetOf(parsed.asked, abstainKeyOf(parsed.option)).match_key });
      if (imageRoute && !service.images) throw new HttpError(400, `examples with images: ${NO_IMAGE_ENGINE}`);
      if (imageRoute) await refuseBadImages(parsed);
      const task = imageRoute
        ? await fitAbstention(service.images!.context, service.images!.fingerprint, parsed, cacheSalt)
        : await fitAbstention(service, store.fingerprint, parsed, cacheSalt);
      ctx.body = { ...abstentionSummaryOf(task), replaced: await store.registerAbstention(task) };
    } catch (e) {
      throw registrationError(e);
    }
  });

  router.get('/v1/abstention/tasks', (ctx) => {
    ctx.body = {
      enabled: service.abstentions.enabled,
      abstain_option: service.abstentions.defaultOption ?? null,
      fingerprint: store.fingerprint.hash,
      tasks: store.abstentionList().map(abstentionSummaryOf),
    };
  });

  router.delete('/v1/abstention/tasks/:id', async (ctx) => {
    const id = ctx.params.id;
    if (!(await store.removeAbstention(id))) throw new HttpError(404, `no abstention task has the id ${JSON.stringify(id)}`);
    ctx.body = { deleted: id };
  });
}
