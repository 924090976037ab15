/**
 * A binding names a registry entry either as a plain key ("exec.sim.transfer") or as an object whose
 * executor_key / signer_key is the registry key and whose other fields are passed to the executor.
 */

function keyOf(binding: unknown, field: 'executor_key' | 'signer_key'): string | null {
  if (typeof binding === 'string') return binding.trim() === '' ? null : binding;
  if (binding !== null && typeof binding === 'object' && !Array.isArray(binding)) {
    const key = (binding as Record<string, unknown>)[field];
    if (typeof key === 'string' && key.trim() !== '') return key;
  }
  return null;
}

/** The executor registry key of a binding, or null when the binding names none. */
export function executorKeyOf(binding: unknown): string | null {
  return keyOf(binding, 'executor_key');
}

/** The signer registry key of a binding, or null when the node has no signer. */
export function signerKeyOf(binding: unknown): string | null {
  return keyOf(binding, 'signer_key');
}
