// How the page writes numbers, sizes, durations and times: the same few rules everywhere, so a value reads the
// same in a card, a table and a chart's legend. Non-finite statistics are written as such (a diverged round).

export function num(value: number | null | undefined, digits = 4): string {
  if (value === null || value === undefined) return "–";
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  if (value === 0) return "0";
  const abs = Math.abs(value);
  if (abs >= 1e5 || abs < 1e-3) return value.toExponential(2);
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(abs >= 100 ? 1 : digits);
}

export function int(value: number | null | undefined): string {
  return value === null || value === undefined ? "–" : Math.round(value).toLocaleString("en-US");
}

export function bytes(value: number | null | undefined): string {
  if (value === null || value === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = value;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v.toFixed(u === 0 ? 0 : 1)} ${units[u]}`;
}

export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
  return `${Math.floor(s / 86400)} d ${String(Math.floor((s % 86400) / 3600)).padStart(2, "0")} h`;
}

/** UTC time of day, with the date when it is not today. */
export function time(ms: number | null | undefined, nowMs = Date.now()): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  const iso = new Date(ms).toISOString();
  const sameDay = iso.slice(0, 10) === new Date(nowMs).toISOString().slice(0, 10);
  return `${sameDay ? "" : `${iso.slice(0, 10)} `}${iso.slice(11, 19)} UTC`;
}

export function shortSha(sha: string | null): string {
  return sha === null ? "–" : sha.slice(0, 12);
}
