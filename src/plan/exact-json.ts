/**
 * JSON numbers that JSON.parse would not keep exactly. JSON.parse turns 12345678901234567890 into
 * 12345678901234567000 and 0.10000000000000000001 into 0.1 without a word, before any code sees the
 * value; what is then stored, shown and hashed is not what the client sent. This reads the number
 * tokens of the text itself and reports each one whose parsed value differs from what was written,
 * or that is a whole number beyond Number.MAX_SAFE_INTEGER (arithmetic on it would not be exact), by
 * its dotted path in the document.
 *
 * Only for text JSON.parse has accepted (it does not report syntax errors). Iterative: a deeply
 * nested body costs a loop, not the stack.
 */

export interface InexactNumber {
  /** Dotted path of the value ("intent.amount", "items.0"); "" for a top-level number. */
  path: string;
  /** The number as written. */
  source: string;
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

export function inexactNumbers(text: string, limit = 20): InexactNumber[] {
  const found: InexactNumber[] = [];
  // One entry per open container: the key or index of the value being read in it.
  const stack: Array<{ array: boolean; key: string | number; expectKey: boolean }> = [];
  let i = 0;
  while (i < text.length && found.length < limit) {
    const ch = text[i]!;
    if (ch === '{' || ch === '[') {
      stack.push({ array: ch === '[', key: ch === '[' ? 0 : '', expectKey: ch === '{' });
      i++;
    } else if (ch === '}' || ch === ']') {
      stack.pop();
      i++;
    } else if (ch === ',') {
      const top = stack[stack.length - 1]!;
      if (top.array) top.key = (top.key as number) + 1;
      else top.expectKey = true;
      i++;
    } else if (ch === '"') {
      const end = stringEnd(text, i);
      const top = stack[stack.length - 1];
      if (top && !top.array && top.expectKey) {
        top.key = JSON.parse(text.slice(i, end)) as string;
        top.expectKey = false;
      }
      i = end;
    } else if (ch === '-' || (ch >= '0' && ch <= '9')) {
      NUMBER.lastIndex = i;
      const token = NUMBER.exec(text)![0];
      if (!isExact(token)) found.push({ path: stack.map((s) => String(s.key)).join('.'), source: token });
      i += token.length;
    } else {
      // Whitespace, ':' and the letters of true, false and null.
      i++;
    }
  }
  return found;
}

/** The index just past the closing quote of the string starting at `start`. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length) {
    const ch = text[i];
    if (ch === '\\') i += 2;
    else if (ch === '"') return i + 1;
    else i++;
  }
  return i;
}

/** True when the double JSON.parse makes of `token` is the number written, and not a whole number beyond 2^53-1. */
export function isExact(token: string): boolean {
  const n = Number(token);
  if (!Number.isFinite(n)) return false;
  if (Number.isInteger(n) && !Number.isSafeInteger(n)) return false;
  return normalized(token) === normalized(String(n));
}

/** A decimal as "<sign><digits>e<exponent>" without leading or trailing zeros: equal values, equal strings. */
function normalized(s: string): string {
  const m = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/.exec(s);
  if (!m) return s;
  const fraction = m[3] ?? '';
  let digits = (m[2]! + fraction).replace(/^0+/, '');
  if (digits === '') return '0';
  // A huge written exponent on a non-zero number never gets here: Number() made it 0 or Infinity.
  let exponent = Number(m[4] ?? '0') - fraction.length;
  const trailing = digits.length - digits.replace(/0+$/, '').length;
  digits = digits.slice(0, digits.length - trailing);
  exponent += trailing;
  return `${m[1]}${digits}e${exponent}`;
}
