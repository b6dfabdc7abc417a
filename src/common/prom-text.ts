/**
 * Prometheus text exposition (format 0.0.4) from metric families in prom-client's JSON form, so
 * that families gathered from several processes (the server's registry and each engine process's,
 * relayed over IPC) merge into one HELP/TYPE block per name, told apart by their labels.
 */
export interface Family {
  name: string;
  help: string;
  type: string;
  values: { value: number; labels: Record<string, string | number>; metricName?: string }[];
}

const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const escapeHelp = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

function number(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/** `extra` labels are added to every sample of `families`. */
export function withLabels(families: Family[], extra: Record<string, string>): Family[] {
  return families.map((f) => ({ ...f, values: f.values.map((v) => ({ ...v, labels: { ...extra, ...v.labels } })) }));
}

export function formatFamilies(families: Family[]): string {
  const merged = new Map<string, Family>();
  for (const f of families) {
    const seen = merged.get(f.name);
    if (seen) seen.values.push(...f.values);
    else merged.set(f.name, { ...f, values: [...f.values] });
  }
  const lines: string[] = [];
  for (const f of merged.values()) {
    lines.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
    for (const v of f.values) {
      const labels = Object.entries(v.labels).map(([k, x]) => `${k}="${escapeLabel(String(x))}"`);
      lines.push(`${v.metricName ?? f.name}${labels.length ? `{${labels.join(',')}}` : ''} ${number(v.value)}`);
    }
  }
  return lines.join('\n') + '\n';
}
