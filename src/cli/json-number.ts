import { inexactNumbers } from '../plan/exact-json.ts';
import { UsageError } from './command.ts';

/**
 * A number JSON.parse would round (an option's 12345678901234567890 becomes 12345678901234567000) is
 * refused here, where the digits typed are still known; the API would only see the rounded one.
 */
export function refuseInexactNumbers(name: string, raw: string): void {
  const [first] = inexactNumbers(raw, 1);
  if (first) {
    throw new UsageError(`--${name}: ${first.path || 'the value'} is the number ${first.source}, which JSON cannot carry exactly; write it as a string ("${first.source}")`);
  }
}
