"""The store's own settings (``store_settings``: the embedding dimension, marks that
migrations leave for work still to do). Migrations write them; at run time the only
change is clearing a mark once its work is done."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import StoreSetting


async def is_set(session: AsyncSession, key: str) -> bool:
    return (await session.execute(select(StoreSetting.value).where(StoreSetting.key == key))).scalar() is not None


async def clear(session: AsyncSession, key: str) -> None:
    await session.execute(delete(StoreSetting).where(StoreSetting.key == key))
