-- Loyalty (issue 6): ledgers owned by a card, negative balances, and when a debt was paid.
--
-- A card-based program keeps its points on the card's own ledger, shared by the card's profiles:
-- a ledger (and each of its transactions) belongs to exactly one profile or one card. The primary
-- key (program, profile, subledger) cannot hold a card ledger (no profile), so it becomes two
-- unique keys, one per kind of owner; the transactions reference their ledger through either.
ALTER TABLE loyalty_transactions DROP CONSTRAINT loyalty_transactions_program_id_profile_id_subledger_id_fkey;
ALTER TABLE loyalty_ledgers DROP CONSTRAINT loyalty_ledgers_pkey;
ALTER TABLE loyalty_ledgers ALTER COLUMN profile_id DROP NOT NULL;
ALTER TABLE loyalty_ledgers ADD COLUMN card_id integer REFERENCES loyalty_cards(id) ON DELETE CASCADE;
ALTER TABLE loyalty_ledgers ADD CONSTRAINT loyalty_ledgers_one_owner CHECK ((profile_id IS NULL) <> (card_id IS NULL));
ALTER TABLE loyalty_ledgers ADD CONSTRAINT loyalty_ledgers_profile_key UNIQUE (program_id, profile_id, subledger_id);
ALTER TABLE loyalty_ledgers ADD CONSTRAINT loyalty_ledgers_card_key UNIQUE (program_id, card_id, subledger_id);

ALTER TABLE loyalty_transactions ALTER COLUMN profile_id DROP NOT NULL;
ALTER TABLE loyalty_transactions ADD COLUMN card_id integer;
ALTER TABLE loyalty_transactions ADD CONSTRAINT loyalty_transactions_one_owner CHECK ((profile_id IS NULL) <> (card_id IS NULL));
ALTER TABLE loyalty_transactions ADD CONSTRAINT loyalty_transactions_profile_ledger
  FOREIGN KEY (program_id, profile_id, subledger_id) REFERENCES loyalty_ledgers (program_id, profile_id, subledger_id) ON DELETE CASCADE;
ALTER TABLE loyalty_transactions ADD CONSTRAINT loyalty_transactions_card_ledger
  FOREIGN KEY (program_id, card_id, subledger_id) REFERENCES loyalty_ledgers (program_id, card_id, subledger_id) ON DELETE CASCADE;
CREATE INDEX loyalty_transactions_card_ledger_idx ON loyalty_transactions (program_id, card_id, subledger_id, created, id) WHERE card_id IS NOT NULL;
CREATE INDEX loyalty_transactions_card_open_grants ON loyalty_transactions (program_id, card_id, subledger_id, expiry_date)
  WHERE card_id IS NOT NULL AND type = 'addition' AND remaining > 0;

-- Negative balances, for programs that allow them. A deduction takes the active points it finds
-- and records what they did not cover as `uncovered`: the ledger's debt (negativeBalance) is the
-- sum of it. Active points pay debts (oldest first) before they can be spent: a payment is a
-- consumption of the grant by the old subtraction, made under the ledger's lock. So for every
-- subtraction, amount = its consumptions + uncovered.
ALTER TABLE loyalty_programs ADD COLUMN allow_negative_balance boolean NOT NULL DEFAULT false;
ALTER TABLE loyalty_transactions ADD COLUMN uncovered numeric NOT NULL DEFAULT 0;
ALTER TABLE loyalty_transactions ADD CONSTRAINT loyalty_transactions_uncovered CHECK (uncovered >= 0 AND uncovered <= amount AND (uncovered = 0 OR type = 'subtraction'));
CREATE INDEX loyalty_transactions_debts ON loyalty_transactions (program_id, profile_id, card_id, subledger_id, created, id)
  WHERE type = 'subtraction' AND uncovered > 0;
-- When a consumption was made, when that is later than its transaction (a debt paid by a later
-- grant); null means at the transaction. Balances as of a past date give such payments back.
ALTER TABLE loyalty_consumptions ADD COLUMN created timestamptz;
