/**
 * A clock for a test file that seeds figures about "today" once and reads them back later: a run
 * that crosses midnight UTC between the two would find today empty. It follows the machine's clock
 * until `hold(atMs)`; from then on it follows it only up to the last millisecond of `atMs`'s UTC
 * day, and stays there. Give `now` to the app (`startTestApp({ now })`) and `day` to the browser
 * (`page.clock.setFixedTime`) and the assertions, so that all three agree on which day is today.
 */
const DAY_MS = 86_400_000;

export interface HeldDay {
  now: () => number;
  hold: (atMs: number) => void;
  /** The held UTC day, YYYY-MM-DD. */
  readonly day: string;
  /** The instant held. */
  readonly at: number;
}

export function heldDay(): HeldDay {
  let until = Number.POSITIVE_INFINITY;
  let at: number | undefined;
  return {
    now: () => Math.min(Date.now(), until),
    hold(atMs) {
      at = atMs;
      until = (Math.floor(atMs / DAY_MS) + 1) * DAY_MS - 1;
    },
    get at() {
      if (at === undefined) throw new Error("no day held yet");
      return at;
    },
    get day() {
      return new Date(this.at).toISOString().slice(0, 10);
    },
  };
}
