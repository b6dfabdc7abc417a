/** POST/GET /v1/abstention/tasks, DELETE /v1/abstention/tasks/{id} (README, "Abstention"). */
import Router from '@koa/router';
import { abstentionSummaryOf } from '../../abstention/form';
import { registerAbstention, TaskChangedError } from '../../abstention/register';
import { abstainKeyOf, AbstentionTask, optionSetOf } from '../../abstention/task';
import { ExampleError } from '../../tasks/read-examples';
import { abstentionHolderIn } from '../../tasks/store';
import { HttpError } from '../http-error';
import { Service } from '../service';
import { abstentionHeld, parseAbstentionRegistration } from './abstention-body';
import { exampleError, refuseHeld, storeRegistered } from './tasks';

export function abstentionRoutes(router: Router, service: Service) {
  const store = service.tasks;

  router.post('/v1/abstention/tasks', async (ctx) => {
    const parsed = parseAbstentionRegistration(ctx.request.body);
    const matchKey = optionSetOf(parsed.asked, abstainKeyOf(parsed.option)).match_key;
    refuseHeld(abstentionHeld(abstentionHolderIn(store.abstentionList(), { id: parsed.id, match: parsed.match, match_key: matchKey })));
    let task: AbstentionTask;
    try {
      task = await registerAbstention(service, store.fingerprint, parsed);
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
