/**
 * Abstention benchmark (not a test): `npm run bench:abstention`. On the random-weight tiny-qwen3,
 * through the real server over HTTP (docs/abstention.md), with --abstain-option "can't tell":
 *   1. visible: notes that name one of 12 code words (answerable) or hold the marker "[blank]"
 *      (unanswerable). A head task on the question with "can't tell" among its options reads the
 *      marker from the hidden state; its labels for blank notes say "can't tell" only 30% of the
 *      time (annotators who guessed "alpha" otherwise), so the abstain option is seldom the most
 *      probable. An abstention task (append form) fitted on 100 + 100 fresh notes: its record,
 *      then a held-out 100 + 100 through /v1/systemone, scored with the threshold, the default
 *      rule (the same answers, decided by unknown_probability against the other options) and
 *      never abstaining;
 *   2. not visible: notes that all name a code word, 30% labelled unanswerable at random: the
 *      record must say "not justified"; and 20 such label draws: how many were wrongly kept.
 */
import { blankAbstentionExamples, blankHeadExamples, CANT_TELL } from '../test/helpers/abstention';
import { startServerProcess } from '../test/helpers/server-process';

const f = (x: number, d = 3) => x.toFixed(d);
type Server = Awaited<ReturnType<typeof startServerProcess>>;
type Example = { request: any; answer: string | null };

/** Held-out accuracy and coverage of the three rules from the served answers. */
async function heldOut(s: Server, examples: Example[]) {
  const rules = { threshold: [] as boolean[], default: [] as boolean[], never: [] as boolean[] };
  const answered = { threshold: 0, default: 0, never: examples.length };
  for (const e of examples) {
    const a = (await s.post('/v1/systemone', e.request)).body.answers.q;
    const u = a.unknown_probability;
    const byDefault = Object.values(a.probabilities as Record<string, number>).every((p) => u > p * (1 - u));
    const score = (abstains: boolean) => (abstains ? e.answer === null : a.choice === e.answer);
    rules.threshold.push(score(a.abstained));
    rules.default.push(score(byDefault));
    rules.never.push(score(false));
    answered.threshold += a.abstained ? 0 : 1;
    answered.default += byDefault ? 0 : 1;
  }
  const n = examples.length;
  return Object.fromEntries(
    (Object.keys(rules) as (keyof typeof rules)[]).map((k) => {
      const acc = rules[k].filter(Boolean).length / n;
      return [k, { accuracy: acc, se: Math.sqrt((acc * (1 - acc)) / n), coverage: answered[k] / n }];
    }),
  );
}

async function visible(s: Server) {
  console.log('\n## 1. Answerability visible in the state (a marker), read by a head task\n');
  const head = await s.post('/v1/tasks', { id: 'blank-head', examples: blankHeadExamples(120, 60) });
  console.log(`Head task (12 code words + "can't tell", 180 examples): applied ${head.body.applied}, CV accuracy ${f(head.body.record.metrics.applied.accuracy)}.`);
  const reg = await s.post('/v1/abstention/tasks', { id: 'blank', option: { append: CANT_TELL }, examples: blankAbstentionExamples(100, 100) });
  const r = reg.body.record;
  console.log(`Abstention task (100 answerable + 100 blank): threshold ${reg.body.applied ? f(reg.body.threshold, 4) : 'none'} (${reg.body.applied ? 'applied' : r.reason}); read ${f(r.read_ms / 1000, 1)} s, fitted in ${f(r.fit_ms, 1)} ms.`);
  console.log(`Evidence over 5 folds x 3: vs never abstaining +${f(r.evidence.vs_never.gain)} ± ${f(r.evidence.vs_never.se)} (t ${f(r.evidence.vs_never.t, 1)}); vs the default rule +${f(r.evidence.vs_default.gain)} ± ${f(r.evidence.vs_default.se)} (t ${f(r.evidence.vs_default.t, 1)}).\n`);
  const held = await heldOut(s, blankAbstentionExamples(100, 100, 20_000));
  console.log('| rule | CV accuracy | CV coverage | held-out 200 accuracy | held-out coverage |');
  console.log('|---|---|---|---|---|');
  for (const [name, k] of [['fitted threshold', 'threshold'], ['default rule (abstain option most probable)', 'default'], ['never abstain', 'never']] as const) {
    const cv = r.cross_validated[k];
    console.log(`| ${name} | ${f(cv.accuracy)} | ${f(cv.coverage)} | ${f(held[k].accuracy)} ± ${f(held[k].se)} | ${f(held[k].coverage)} |`);
  }
}

async function notVisible(s: Server) {
  console.log('\n## 2. Answerability not visible: notes that all name a code word, 30% labelled unanswerable at random\n');
  let kept = 0;
  const reasons: string[] = [];
  for (let seed = 0; seed < 20; seed++) {
    const examples = blankAbstentionExamples(80, 0, 30_000 + 100 * seed).map((e, i) => ({ ...e, answer: (i * 7 + seed * 13) % 10 < 3 ? null : e.answer }));
    const reg = await s.post('/v1/abstention/tasks', { id: 'blank', option: { append: CANT_TELL }, examples });
    if (reg.body.applied) kept++;
    else reasons.push(reg.body.record.reason);
    if (seed === 0) console.log(`First draw: applied ${reg.body.applied}; ${reg.body.record.reason ?? ''}`);
  }
  console.log(`Thresholds wrongly kept: ${kept} of 20.`);
  const overDefault = reasons.filter((x) => /default rule/.test(x)).length;
  console.log(`Reasons: ${reasons.length - overDefault} no gain over never abstaining, ${overDefault} no gain over the default rule.`);
}

async function main() {
  console.log(`# Abstention benchmark (${new Date().toISOString().slice(0, 10)})`);
  const s = await startServerProcess(['--port', '0', '--dtype', 'fp32', '--base', 'tiny-qwen3', '--abstain-option', CANT_TELL]);
  try {
    await visible(s);
    await notVisible(s);
  } finally {
    await s.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
