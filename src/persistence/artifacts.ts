import type { Queryable } from './db.ts';

/** Artifacts a node produced: prepared actions, signatures, proofs, provider-generated documents. */
export interface NewArtifact {
  request_id: string;
  request_node_id: string;
  attempt_no: number;
  artifact_type: string;
  artifact_digest: string | null;
  content_format: string;
  content_inline: string | null;
  content_uri: string | null;
  artifact_metadata: Record<string, unknown>;
}

/** An artifact of a node's attempt whose content is stored inline (or absent). */
export function inlineArtifact(
  node: { id: string; request_id: string },
  attemptNo: number,
  a: { type: string; digest: string | null; format: string; content: string | null; metadata: Record<string, unknown> },
): NewArtifact {
  return {
    request_id: node.request_id,
    request_node_id: node.id,
    attempt_no: attemptNo,
    artifact_type: a.type,
    artifact_digest: a.digest,
    content_format: a.format,
    content_inline: a.content,
    content_uri: null,
    artifact_metadata: a.metadata,
  };
}

export interface ArtifactRow extends NewArtifact {
  id: string;
  created_at: Date;
}

export async function insertArtifacts(db: Queryable, artifacts: NewArtifact[]): Promise<void> {
  if (artifacts.length === 0) return;
  await db.query(
    `INSERT INTO artifacts (request_id, request_node_id, attempt_no, artifact_type, artifact_digest, content_format,
                            content_inline, content_uri, artifact_metadata)
     SELECT a.request_id, a.request_node_id, a.attempt_no, a.artifact_type, a.artifact_digest, a.content_format,
            a.content_inline, a.content_uri, a.artifact_metadata
       FROM jsonb_to_recordset($1::jsonb) AS a(request_id uuid, request_node_id uuid, attempt_no int, artifact_type text,
            artifact_digest text, content_format text, content_inline text, content_uri text, artifact_metadata jsonb)`,
    [JSON.stringify(artifacts)],
  );
}

export async function artifactsOfNodes(db: Queryable, nodeIds: string[]): Promise<ArtifactRow[]> {
  if (nodeIds.length === 0) return [];
  const { rows } = await db.query<ArtifactRow>(
    'SELECT * FROM artifacts WHERE request_node_id = ANY($1::uuid[]) ORDER BY created_at, id',
    [nodeIds],
  );
  return rows;
}

export async function artifactsOfMovement(db: Queryable, movementId: string): Promise<ArtifactRow[]> {
  const { rows } = await db.query<ArtifactRow>('SELECT * FROM artifacts WHERE request_id = $1 ORDER BY created_at, id', [
    movementId,
  ]);
  return rows;
}
