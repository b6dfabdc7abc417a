/**
 * What a fit takes and gives, and the record it keeps of each part (calibration, head): the types
 * shared by the procedure (fit-task.ts), the rules that explain a part (part-reasons.ts) and the
 * stored task (../task.ts).
 */
import { Calibration } from './calibration';
import { Evidence, Metrics } from './evidence';
import { HeadForm } from './head';
import { Readouts } from './softmax-model';

export interface FitInput {
  id: string;
  keys: string[];
  readouts: Readouts;
  /** n x d hidden states at the readout position, when a head may be fitted. */
  hidden?: { d: number; data: Float64Array };
}

export interface PartRecord {
  fitted: boolean;
  /** Whether its numbers enter the served distribution (part-reasons.ts). */
  applied: boolean;
  /** Why it was not fitted or not applied. */
  reason?: string;
  /** The calibration inside a head of form "residual". */
  applied_as?: string;
  /** The calibration's own verdict against the baseline, whatever the head does. */
  kept_alone?: boolean;
  reason_alone?: string;
  evidence?: Evidence & { against: string };
  hyper?: Record<string, unknown>;
}

export interface FitOutput {
  calibration: Calibration;
  head: { form: HeadForm; lambda: number; d: number; W: Float32Array; c: Float64Array } | null;
  applied: 'none' | 'calibration' | 'head';
  record: {
    n: number;
    counts: Record<string, number>;
    folds: { outer: number; calibration_repeats: number; head_repeats: number; inner: number; seed: number };
    calibration: PartRecord;
    head: PartRecord;
    metrics: { baseline: Metrics; calibration: Metrics; head?: Metrics; applied: Metrics };
    fit_ms: number;
  };
}
