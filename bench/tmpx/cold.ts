import { dossier, topicQuestion } from '../workload';
const port = process.argv[2];
const base = Number(process.argv[3] ?? 50);
(async () => {
  const warm: number[] = [], q: number[] = [];
  for (let v = 0; v <= 6; v++) {
    const body = { state: dossier(v + base), questions: { q: topicQuestion(1) } };
    const res = await fetch(`http://127.0.0.1:${port}/v1/systemone`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    await res.json();
    const st = Object.fromEntries(res.headers.get('x-service-stages')!.split(';').map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));
    if (v > 0) { warm.push(st.warm); q.push(st.questions); }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`warm ${med(warm).toFixed(0)} questions ${med(q).toFixed(1)} all ${warm.map((x) => x.toFixed(0)).join(',')}`);
})();
