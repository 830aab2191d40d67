"""Integrity of one conversation's store, as the provenance rules promise it: no
relation without a supporting message, no search document of a record that is gone
(an anchor entity and a dirty community count as gone: neither may be found).
Read-only; the forgetting benchmark checks it after every deletion."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import Relation, RelationProvenance

_ORPHAN_DOCUMENTS = text(
    """
    SELECT d.id FROM search_documents d WHERE d.conversation_id = :cid AND CASE d.kind
      WHEN 'episode' THEN NOT EXISTS (SELECT 1 FROM episodes x WHERE x.id = d.ref_id)
      WHEN 'relation' THEN NOT EXISTS (SELECT 1 FROM relations x WHERE x.id = d.ref_id)
      WHEN 'entity' THEN NOT EXISTS (SELECT 1 FROM entities x WHERE x.id = d.ref_id AND NOT x.is_anchor)
      WHEN 'community' THEN NOT EXISTS (SELECT 1 FROM communities x WHERE x.id = d.ref_id AND NOT x.dirty)
    END
    """
)


@dataclass(frozen=True)
class Integrity:
    """Ids (opaque handles) of the conversation's relations, of those without support,
    and of search documents whose record is gone."""

    relations: frozenset[int]
    unsupported_relations: frozenset[int]
    orphan_documents: frozenset[int]

    @property
    def intact(self) -> bool:
        return not self.unsupported_relations and not self.orphan_documents


async def check_integrity(session: AsyncSession, conversation_id: int) -> Integrity:
    cid = conversation_id
    present = (await session.execute(select(Relation.id).where(Relation.conversation_id == cid))).scalars()
    unsupported = (
        await session.execute(
            select(Relation.id).where(Relation.conversation_id == cid, ~Relation.id.in_(select(RelationProvenance.relation_id)))
        )
    ).scalars()
    orphans = (await session.execute(_ORPHAN_DOCUMENTS, {"cid": cid})).scalars()
    return Integrity(frozenset(present), frozenset(unsupported), frozenset(orphans))
