/**
 * A task record's two parts (calibration, head) made to say what the task applies (docs/tasks.md,
 * "The record"): a part's `applied` is true exactly when its numbers enter the served distribution,
 * and a part not applied always says why in `reason`. The calibration's own verdict against the
 * baseline stays beside it (`kept_alone`, and `reason_alone` when it was not kept), because what
 * is applied also depends on the head:
 *   - under a head of form "residual", the calibration is applied inside the head (`applied_as`),
 *     even where alone it was not kept: the head adds to the calibrated logits, and was
 *     cross-validated so;
 *   - under a head of form "replace", it is not applied: superseded by the head;
 *   - otherwise it is applied when kept alone.
 * Run when a task is fitted and when one is imported (idempotent), so that a record exported by an
 * older server, or written by hand, reads the same way.
 */
import type { FitOutput, PartRecord } from './record';
import type { HeadForm } from './head';

const NOT_KEPT = 'its cross-validated gain was not large and significant enough (see evidence)';

type Parts = Pick<FitOutput['record'], 'calibration' | 'head'>;

export function explainedParts<R extends Parts>(record: R, applied: FitOutput['applied'], headForm: HeadForm | undefined): R {
  const given: Partial<PartRecord> = record.calibration ?? {};
  // A fresh fit, or a record from before these fields: the part was applied exactly when kept alone.
  const keptAlone = given.kept_alone ?? given.applied === true;
  const reasonAlone = keptAlone ? undefined : given.reason_alone ?? given.reason ?? NOT_KEPT;
  const { reason: _r, applied_as: _a, reason_alone: _ra, ...calRest } = given;
  const cal: PartRecord = { fitted: true, ...calRest, applied: false, kept_alone: keptAlone, ...(reasonAlone ? { reason_alone: reasonAlone } : {}) };
  if (applied === 'head' && headForm === 'residual') {
    cal.applied = true;
    cal.applied_as = 'inside the head: a head of form "residual" adds to the calibrated logits';
  } else if (applied === 'head') {
    cal.reason = 'superseded by the head: a head of form "replace" answers from the hidden state alone';
  } else if (applied === 'calibration') {
    cal.applied = true;
  } else {
    cal.reason = reasonAlone ?? NOT_KEPT;
  }
  const { reason: headReason, ...headRest } = record.head ?? { fitted: false, applied: false };
  const head: PartRecord = { ...headRest, applied: applied === 'head' };
  if (!head.applied) head.reason = headReason ?? (head.fitted ? NOT_KEPT : 'not fitted');
  return { ...record, calibration: cal, head };
}
