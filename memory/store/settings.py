"""The store's own settings (``store_settings``: the embedding dimension, marks that
migrations leave for work still to do, the default retention window the processes last
ran with). Migrations write most of them; at run time a mark is cleared once its work is
done, and the retention default recorded when it changes (memory/privacy/commands.py)."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import StoreSetting


async def is_set(session: AsyncSession, key: str) -> bool:
    return (await session.execute(select(StoreSetting.value).where(StoreSetting.key == key))).scalar() is not None


async def read(session: AsyncSession, key: str) -> str | None:
    return (await session.execute(select(StoreSetting.value).where(StoreSetting.key == key))).scalar()


async def put(session: AsyncSession, key: str, value: str) -> None:
    statement = insert(StoreSetting).values(key=key, value=value)
    await session.execute(statement.on_conflict_do_update(index_elements=[StoreSetting.key], set_={"value": value}))


async def clear(session: AsyncSession, key: str) -> None:
    await session.execute(delete(StoreSetting).where(StoreSetting.key == key))
