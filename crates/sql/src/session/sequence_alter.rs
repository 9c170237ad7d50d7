//! `ALTER SEQUENCE` and `ALTER TABLE ... ALTER COLUMN c ADD GENERATED ...
//! AS IDENTITY`, which pg_dump writes for every serial and identity column
//! (parsed by `crate::sequence_parse`, which sqlparser cannot).
//!
//! Both run in the session's transaction (the open block, or one of their
//! own), like every catalog change:
//! * `OWNED BY t.c | NONE` is recorded in the transaction and reaches the
//!   sequence when it commits (sequences live outside the catalog's
//!   transactions, as their owner renames do), so a ROLLBACK leaves it;
//! * an identity creates its sequence pending until the commit and sets
//!   the column's identity and default as a catalog change of the table;
//! * `RESTART [WITH n]` is `setval(n, false)`, which no transaction undoes:
//!   it is refused inside a block rather than run as if it could be;
//! * `AS`, `INCREMENT`, `MINVALUE` / `MAXVALUE`, `START`, `CACHE` and
//!   `CYCLE` are recorded like OWNED BY and reach the sequence when the
//!   transaction commits (journaled with the others across a crash,
//!   `crate::sequence_commit`). Until then the block that altered a
//!   sequence may not draw from it or set it (0A000: the values would
//!   follow the old parameters, where PostgreSQL's follow the new);
//!   other sessions draw by the old ones until the commit, as if they
//!   had drawn before it. With RESTART in the same statement they are
//!   refused (0A000: RESTART takes effect at once, they at commit);
//! * `OWNER TO role` gives the sequence away at commit (as OWNED BY);
//!   RENAME and SET SCHEMA are refused (0A000).
//!
//! Privileges: a member of the sequence's owning role, or the owner of
//! the table owning it, may change it (a sequence with neither recorded
//! needs a superuser); OWNED BY also needs the owner of the table it is
//! given to.

use datafusion::sql::sqlparser::ast::{Owner, SequenceOptions};
use eddy_storage::StorageError;

use super::sequence_ddl::{nextval_default, option_int, sequence_from_options, sequence_type_name};
use super::{run_blocking, Output, Session};
use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, table_name};
use crate::search_path::{check_created_name, check_relation};
use crate::sequence_parse::{AddIdentity, AlterCommand, AlterSequence, AlterSequenceAction};
use crate::sequences::{OwnedBy, SequenceChange, SequenceParameters, Sequences};
use eddy_common::Identity;

impl Session {
    /// Runs `cmd` in the open transaction block, or in a transaction of
    /// its own that commits when it succeeds.
    pub(super) async fn alter_command(&mut self, cmd: AlterCommand) -> Result<Output> {
        if let Some(t) = &self.txn {
            if t.read_only {
                return Err(SqlError::ReadOnlyTransaction(alter_tag(&cmd).into()));
            }
            return self.run_alter_command(cmd).await;
        }
        let (isolation, read_only) = self.default_modes()?;
        if read_only {
            return Err(SqlError::ReadOnlyTransaction(alter_tag(&cmd).into()));
        }
        self.open_implicit(isolation, read_only)?;
        let r = self.run_alter_command(cmd).await;
        self.close_implicit(r)
    }

    async fn run_alter_command(&mut self, mut cmd: AlterCommand) -> Result<Output> {
        self.resolve_alter_names(&mut cmd)?;
        if !self.public_on_path() {
            check_names(&cmd, &|n| self.is_schema_storage_name(n))?;
        }
        match cmd {
            AlterCommand::Sequence(a) => self.alter_sequence(a),
            AlterCommand::AddIdentity(a) => self.add_identity(a),
            AlterCommand::View(a) => self.alter_view(a),
        }
    }

    fn alter_sequence(&mut self, a: AlterSequence) -> Result<Output> {
        let done = Ok(Output::Command("ALTER SEQUENCE".into()));
        let name = table_name(&a.name)?;
        if !self.sequence_visible(&name) {
            if a.if_exists {
                return done;
            }
            return Err(SqlError::UndefinedTable(name));
        }
        let current_owner = self.sequence_def(&name).and_then(|d| d.owned_by);
        let opts =
            match a.action {
                AlterSequenceAction::OwnerTo(owner) => {
                    self.alter_sequence_owner(&name, &owner)?;
                    return done;
                }
                AlterSequenceAction::RenameTo(_) => {
                    return Err(SqlError::FeatureNotSupported(
                        "ALTER SEQUENCE ... RENAME TO is not supported".into(),
                    ))
                }
                AlterSequenceAction::SetSchema(_) => return Err(SqlError::FeatureNotSupported(
                    "ALTER SEQUENCE ... SET SCHEMA is not supported (Eddy has one schema, public)"
                        .into(),
                )),
                AlterSequenceAction::Options(opts) => opts,
            };
        self.check_sequence_owner(&name, current_owner.as_ref())?;
        let parameters = if opts.data_type.is_some() || !opts.options.is_empty() {
            if opts.restart.is_some() {
                // RESTART is a setval that no transaction undoes, the
                // others commit with the transaction: not both at once
                let other = opts.options.first().map_or("AS", option_word);
                return Err(SqlError::FeatureNotSupported(format!(
                    "ALTER SEQUENCE ... RESTART together with {other} is not supported: \
                     run them as two ALTER SEQUENCE statements"
                )));
            }
            Some(self.altered_parameters(&name, opts.data_type.as_ref(), &opts.options)?)
        } else {
            None
        };
        let new_owner = match &opts.owned_by {
            Some(Some(column)) => {
                let owner = self.owner_column(column)?;
                if let Some(o) = &owner {
                    self.check_owner_named(&o.table)?;
                }
                Some(owner)
            }
            Some(None) => Some(None),
            None => None,
        };
        if let Some(restart) = &opts.restart {
            if self.in_transaction_block() {
                return Err(SqlError::FeatureNotSupported(
                    "ALTER SEQUENCE ... RESTART inside a transaction block is not supported: \
                     it cannot be rolled back (run it outside the block)"
                        .into(),
                ));
            }
            let at = match restart {
                Some(e) => option_int(e)?,
                None => {
                    self.sequence_def(&name)
                        .ok_or_else(|| SqlError::UndefinedTable(name.clone()))?
                        .start
                }
            };
            run_blocking(|| self.db.sequences.setval(&name, at, false))?;
        }
        if let Some(parameters) = parameters {
            self.ddl_txn("ALTER SEQUENCE")?
                .sequence_owned_by
                .push((name.clone(), SequenceChange::Parameters(parameters)));
            if self.in_transaction_block() {
                self.publish_dropped();
            }
        }
        if let Some(owner) = new_owner {
            self.ddl_txn("ALTER SEQUENCE")?
                .sequence_owned_by
                .push((name, SequenceChange::OwnedBy(owner)));
        }
        done
    }

    /// The parameters `ALTER SEQUENCE name AS .. <options>` leaves, by
    /// PostgreSQL's rules (`init_params` of its `sequence.c`): a new type
    /// moves a bound that was the old type's limit to the new type's;
    /// `NO MINVALUE` / `NO MAXVALUE` are the defaults for the increment's
    /// direction; the bounds must hold the start and the current value
    /// (22023).
    fn altered_parameters(
        &self,
        name: &str,
        data_type: Option<&datafusion::sql::sqlparser::ast::DataType>,
        options: &[SequenceOptions],
    ) -> Result<SequenceParameters> {
        let def = self
            .sequence_def(name)
            .ok_or_else(|| SqlError::UndefinedTable(name.to_string()))?;
        // as this transaction left them so far
        let mut p = self
            .txn
            .as_ref()
            .and_then(|t| {
                t.sequence_owned_by.iter().rev().find_map(|(n, c)| match c {
                    SequenceChange::Parameters(p) if n == name => Some(p.clone()),
                    _ => None,
                })
            })
            .unwrap_or_else(|| SequenceParameters::of(&def));
        let old_type_max = Sequences::type_max(&p.type_name);
        let (mut reset_min, mut reset_max) = (false, false);
        if let Some(dt) = data_type {
            p.type_name = crate::pgtypes::column_type_from_sql(dt)
                .ok()
                .and_then(sequence_type_name)
                .ok_or_else(|| {
                    SqlError::InvalidParameter(
                        "sequence type must be smallint, integer, or bigint".into(),
                    )
                })?
                .to_string();
            reset_max = p.max == old_type_max;
            reset_min = p.min == -old_type_max - 1;
        }
        // Some(None): NO MINVALUE / NO MAXVALUE
        let (mut min, mut max) = (None, None);
        for o in options {
            match o {
                SequenceOptions::IncrementBy(e, _) => p.increment = option_int(e)?,
                SequenceOptions::MinValue(v) => min = Some(v.as_ref().map(option_int).transpose()?),
                SequenceOptions::MaxValue(v) => max = Some(v.as_ref().map(option_int).transpose()?),
                SequenceOptions::StartWith(e, _) => p.start = option_int(e)?,
                SequenceOptions::Cache(e) => p.cache = option_int(e)?,
                // sqlparser's flag means NO CYCLE
                SequenceOptions::Cycle(no) => p.cycle = !*no,
            }
        }
        let type_max = Sequences::type_max(&p.type_name);
        match max {
            Some(Some(v)) => p.max = v,
            Some(None) => p.max = if p.increment > 0 { type_max } else { -1 },
            None if reset_max => p.max = type_max,
            None => {}
        }
        match min {
            Some(Some(v)) => p.min = v,
            Some(None) => p.min = if p.increment > 0 { 1 } else { -type_max - 1 },
            None if reset_min => p.min = -type_max - 1,
            None => {}
        }
        let mut altered = def;
        p.apply_to(&mut altered);
        altered.validate()?;
        if let Some((last, _)) = self.db.sequences.position(name) {
            let bad = |m: String| Err(SqlError::InvalidParameter(m));
            if last < p.min {
                return bad(format!(
                    "RESTART value ({last}) cannot be less than MINVALUE ({})",
                    p.min
                ));
            }
            if last > p.max {
                return bad(format!(
                    "RESTART value ({last}) cannot be greater than MAXVALUE ({})",
                    p.max
                ));
            }
        }
        Ok(p)
    }

    /// `ALTER SEQUENCE s OWNER TO role` (pg_dump writes it as ALTER
    /// TABLE): the sequence's owner, or a member of it (or of the owner of
    /// the table owning it), gives it to a role it is a member of.
    pub(super) fn alter_sequence_owner(&mut self, name: &str, owner: &Owner) -> Result<()> {
        let new_owner = self.new_owner(owner)?;
        let def = self
            .sequence_def(name)
            .ok_or_else(|| SqlError::UndefinedTable(name.to_string()))?;
        let current = def
            .owner
            .clone()
            .unwrap_or_else(|| crate::roles::BOOTSTRAP_SUPERUSER.to_string());
        if current == new_owner {
            return Ok(());
        }
        let owns = self.db.roles.effective_roles(&self.user).contains(&current)
            || def
                .owned_by
                .as_ref()
                .is_some_and(|o| self.check_owner_named(&o.table).is_ok());
        self.check_owner_change(&format!("sequence {name}"), owns, &new_owner)?;
        self.ddl_txn("ALTER SEQUENCE")?
            .sequence_owned_by
            .push((name.to_string(), SequenceChange::Owner(new_owner)));
        Ok(())
    }

    fn sequence_def(&self, name: &str) -> Option<crate::sequences::SequenceDef> {
        self.db.sequences.def(name)
    }

    /// Who may change sequence `name`, owned by `owner` (a column) or none:
    /// a member of its owning role, or of the owning table's owner.
    fn check_sequence_owner(&self, name: &str, owner: Option<&OwnedBy>) -> Result<()> {
        let role = self.sequence_def(name).and_then(|d| d.owner);
        if role.is_some_and(|r| self.db.roles.effective_roles(&self.user).contains(&r)) {
            return Ok(());
        }
        match owner {
            Some(o) => self.check_owner_named(&o.table),
            None => {
                self.require_superuser(&format!("alter sequence \"{name}\", which no table owns"))
            }
        }
    }

    fn add_identity(&mut self, a: AddIdentity) -> Result<Output> {
        let done = Ok(Output::Command("ALTER TABLE".into()));
        let table = table_name(&a.table)?;
        let Some(t) = self.db.engine.table(&table) else {
            if a.if_exists {
                return done;
            }
            return Err(SqlError::UndefinedTable(table));
        };
        self.check_owner_named(&table)?;
        let t = self.lock_for_ddl(&t, "ALTER TABLE")?;
        let def = t.def().clone();
        let cname = ident_name(&a.column);
        let (idx, col) = super::alter_columns::column_of(&def, &table, &cname)?;
        let type_name = sequence_type_name(col.ty).ok_or_else(|| {
            SqlError::InvalidParameter(
                "identity column type must be smallint, integer, or bigint".into(),
            )
        })?;
        // PostgreSQL's checks and SQLSTATEs (55000)
        let state = |what: &str| {
            Err(SqlError::NotInPrerequisiteState(format!(
                "column \"{cname}\" of relation \"{table}\" {what}"
            )))
        };
        if col.identity.is_some() {
            return state("is already an identity column");
        }
        if col.default.is_some() {
            return state("already has a default value");
        }
        if col.nullable && !def.primary_key.contains(&idx) {
            return state("must be declared NOT NULL before identity can be added");
        }
        let seq_name = match &a.options.sequence_name {
            Some(n) => {
                let n = table_name(n)?;
                if self.sequence_visible(&n) || self.db.engine.table(&n).is_some() {
                    return Err(SqlError::DuplicateTable(n));
                }
                n
            }
            None => self.free_sequence_name(&table, &cname),
        };
        let mut seq = sequence_from_options(&seq_name, type_name, &a.options.options)?;
        seq.owned_by = Some(OwnedBy {
            table: table.clone(),
            column: cname.clone(),
        });
        // owned, like the table, by the table's owner
        seq.owner = Some(crate::privileges::owner_of(&def).to_string());
        self.create_sequence_in_transaction(seq)?;
        let identity = if a.always {
            Identity::Always
        } else {
            Identity::ByDefault
        };
        self.ddl_change(|ddl| {
            ddl.alter_columns(&table, |cols| {
                let c = cols
                    .get_mut(idx)
                    .ok_or_else(|| StorageError::ColumnNotFound(cname.clone()))?;
                c.identity = Some(identity);
                c.default = Some(nextval_default(&seq_name));
                Ok(())
            })
        })?;
        done
    }
}

/// The unqualified names of `cmd` under a search path without `public`
/// (`crate::search_path`; `qualified`: a user schema's storage name).
fn check_names(cmd: &AlterCommand, qualified: &dyn Fn(&str) -> bool) -> Result<()> {
    let system = &crate::catalog::is_catalog_relation;
    match cmd {
        AlterCommand::Sequence(a) => {
            check_relation(&a.name, system, qualified)?;
            if let AlterSequenceAction::Options(o) = &a.action {
                if let Some(Some(column)) = &o.owned_by {
                    // `t.c`: the table is all but the last part
                    let mut table = column.clone();
                    table.0.pop();
                    check_relation(&table, system, qualified)?;
                }
            }
            Ok(())
        }
        AlterCommand::View(a) => check_relation(&a.name, system, qualified),
        AlterCommand::AddIdentity(a) => {
            check_relation(&a.table, system, qualified)?;
            a.options
                .sequence_name
                .as_ref()
                .map_or(Ok(()), |n| check_created_name(n, qualified))
        }
    }
}

impl Session {
    /// The names of `cmd` that mean user schemas' relations, resolved to
    /// their storage names (`crate::schemas`).
    fn resolve_alter_names(&self, cmd: &mut AlterCommand) -> Result<()> {
        match cmd {
            AlterCommand::Sequence(a) => {
                self.resolve_schema_name(&mut a.name, false)?;
                if let AlterSequenceAction::Options(o) = &mut a.action {
                    if let Some(Some(column)) = &mut o.owned_by {
                        // `[schema.]t.c`: the table is all but the last part
                        if let Some(c) = column.0.pop() {
                            self.resolve_schema_name(column, false)?;
                            column.0.push(c);
                        }
                    }
                }
                Ok(())
            }
            AlterCommand::View(a) => self.resolve_schema_name(&mut a.name, false),
            AlterCommand::AddIdentity(a) => {
                self.resolve_schema_name(&mut a.table, false)?;
                if let Some(n) = &mut a.options.sequence_name {
                    self.resolve_schema_name(n, true)?;
                }
                Ok(())
            }
        }
    }
}

/// The command tag of `cmd`, for a read-only transaction's refusal.
fn alter_tag(cmd: &AlterCommand) -> &'static str {
    match cmd {
        AlterCommand::Sequence(_) => "ALTER SEQUENCE",
        AlterCommand::AddIdentity(_) => "ALTER TABLE",
        AlterCommand::View(_) => "ALTER VIEW",
    }
}

/// How an option is written, for its refusal.
fn option_word(o: &SequenceOptions) -> &'static str {
    match o {
        SequenceOptions::IncrementBy(..) => "INCREMENT",
        SequenceOptions::MinValue(_) => "MINVALUE",
        SequenceOptions::MaxValue(_) => "MAXVALUE",
        SequenceOptions::StartWith(..) => "START",
        SequenceOptions::Cache(_) => "CACHE",
        SequenceOptions::Cycle(_) => "CYCLE",
    }
}
