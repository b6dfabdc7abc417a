/** POST/GET /v1/abstention/tasks, DELETE /v1/abstention/tasks/{id} (docs/abstention.md). */
import Router from '@koa/router';
import { abstentionSummaryOf } from '../../tasks/abstention/form';
import { ParsedAbstention, registerAbstention, TaskChangedError } from '../../tasks/abstention/register';
import { NO_IMAGE_ENGINE } from '../../images/formats';
import { inspectImages } from '../../images/inspect';
import { abstainKeyOf, AbstentionTask, optionSetOf } from '../../tasks/abstention/task';
import { ExampleError } from '../../tasks/read-examples';
import { abstentionHolderIn } from '../../tasks/store';
import { HttpError, Problem, ValidationError } from '../../wire/http-error';
import { Service } from '../service/service';
import { abstentionHeld, parseAbstentionRegistration } from './abstention-body';
import { exampleError, refuseHeld, storeRegistered } from './tasks';

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
    const matchKey = optionSetOf(parsed.asked, abstainKeyOf(parsed.option)).match_key;
    refuseHeld(abstentionHeld(abstentionHolderIn(store.abstentionList(), { id: parsed.id, match: parsed.match, match_key: matchKey })));
    // An image-route task's examples are read by the image engine, as the image route answers.
    const imageRoute = parsed.match === 'imajev_extension';
    if (imageRoute && !service.images) throw new HttpError(400, `examples with images: ${NO_IMAGE_ENGINE}`);
    if (imageRoute) await refuseBadImages(parsed);
    let task: AbstentionTask;
    try {
      task = imageRoute ? await registerAbstention(service.images!.context, service.images!.fingerprint, parsed) : await registerAbstention(service, store.fingerprint, parsed);
    } catch (e) {
      if (e instanceof TaskChangedError) throw new HttpError(409, e.message);
      throw e instanceof ExampleError ? exampleError(e) : e;
    }
    const replaced = await store.change((_, abstention) => storeRegistered(abstention, task, abstentionHeld(abstentionHolderIn(abstention, task))));
    ctx.body = { ...abstentionSummaryOf(task), replaced };
  });

  router.get('/v1/abstention/tasks', (ctx) => {
    ctx.body = {
      enabled: service.abstentionBook.enabled,
      abstain_option: service.abstentionBook.defaultOption ?? null,
      fingerprint: store.fingerprint.hash,
      tasks: store.abstentionList().map(abstentionSummaryOf),
    };
  });

  router.delete('/v1/abstention/tasks/:id', async (ctx) => {
    const id = ctx.params.id;
    const removed = await store.change((_, abstention) => abstention.delete(id));
    if (!removed) throw new HttpError(404, `no abstention task has the id ${JSON.stringify(id)}`);
    ctx.body = { deleted: id };
  });
}
