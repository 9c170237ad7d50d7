//! `CREATE [OR REPLACE] VIEW`, `DROP VIEW`, and what views mean for the
//! other statements: the session's view of the catalog, expansion before
//! planning (`crate::views`), and the dependencies that keep a table a
//! view reads from being dropped or changed under it.
//!
//! A view change is the transaction's own until it commits
//! (`Transaction::view_changes`, recorded in storage at the commit point:
//! `eddy_storage::views`): the session sees its own changes over the
//! committed views, others see only committed ones, ROLLBACK (to a
//! savepoint too) forgets them.
//!
//! As in PostgreSQL: the view's columns are fixed when it is created
//! (names from the query or the column list, types from the plan); OR
//! REPLACE keeps the existing columns (same names and types, in order)
//! and may only add new ones at the end (42P16 otherwise); tables and
//! views share one namespace (42P07); dropping a relation a view reads
//! needs CASCADE, which drops the view (2BP01 without). Unlike
//! PostgreSQL, a view names the relations it reads by name, so renaming
//! them, or renaming or retyping a column a view may read, is refused
//! (0A000), and so is adding a column to a table a view reads with `*`.
//! Dropping a column a view may read is 2BP01, as in PostgreSQL, and
//! refused with CASCADE (0A000: the views are not dropped with it). Which
//! columns a view may read is over-approximated from its query's words
//! (`views::may_read_column`): a column no view names is free to change.

use std::sync::Arc;

use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    AlterTableOperation, CreateTableOptions, CreateView, DropBehavior, Ident, ObjectName, Statement,
};
use eddy_common::{ViewColumn, ViewDef};
use eddy_storage::views::ViewChange;

use super::{Output, Session};
use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, table_name};

impl Session {
    /// View `name` as this session sees it: its transaction's latest
    /// change of that name, else the committed view.
    pub(crate) fn view(&self, name: &str) -> Option<ViewDef> {
        if let Some(c) = self
            .txn
            .as_ref()
            .and_then(|t| t.view_changes.iter().rev().find(|c| c.name == name))
        {
            return c.new.clone();
        }
        self.db.engine.view(name)
    }

    /// Every view this session sees.
    pub(crate) fn visible_views(&self) -> Vec<ViewDef> {
        let mut views = self.db.engine.views();
        if let Some(t) = &self.txn {
            eddy_storage::views::apply(&mut views, &t.view_changes);
        }
        views
    }

    fn sees_views(&self) -> bool {
        self.db.engine.has_views()
            || self
                .txn
                .as_ref()
                .is_some_and(|t| !t.view_changes.is_empty())
    }

    /// Whether `stmt` names a view this session sees.
    pub(crate) fn reads_views(&self, stmt: &Statement) -> bool {
        self.sees_views() && crate::views::names_a_view(stmt, &|n| self.view(n))
    }

    /// Replaces the views `stmt` reads by their queries (`crate::views`).
    pub(crate) fn expand_views(&self, stmt: &mut Statement) -> Result<()> {
        if !self.sees_views() || matches!(stmt, Statement::CreateView(_)) {
            return Ok(());
        }
        crate::views::expand(stmt, &|n| self.view(n))
    }

    /// `CREATE [OR REPLACE] VIEW`.
    pub(super) async fn create_view(&mut self, cv: CreateView) -> Result<Output> {
        refuse_view_options(&cv)?;
        let name = table_name(&cv.name)?;
        if crate::temp_tables::is_reserved(&name) {
            return Err(SqlError::FeatureNotSupported(
                "temporary views are not supported".into(),
            ));
        }
        if !self.db.roles.privileges_of(&self.user).superuser
            && !self.is_schema_storage_name(&name)
            && !self.db.roles.may_create_in_public(&self.user)
        {
            return Err(SqlError::InsufficientPrivilege(
                "permission denied for schema public".into(),
            ));
        }
        self.lock_schema_of(&name)?;
        self.free_dropped_table_name(&name)?;
        self.refuse_replacing_dropped_sequence(&name, "view")?;
        if self.table(&name).is_ok() || self.sequence_visible(&name) {
            if cv.or_replace {
                return Err(SqlError::WrongObjectType(format!(
                    "\"{name}\" is not a view"
                )));
            }
            return Err(SqlError::DuplicateTable(name));
        }
        let existing = self.view(&name);
        if existing.is_some() && !cv.or_replace {
            return Err(SqlError::DuplicateTable(name));
        }
        if let Some(old) = &existing {
            self.check_view_owner(old)?;
        }
        let depends_on = self.relations_of(&cv.query)?;
        if depends_on.contains(&name) {
            return Err(SqlError::InvalidObjectDefinition(format!(
                "infinite recursion detected in rules for relation \"{name}\""
            )));
        }
        let columns = self.view_columns(&cv).await?;
        if let Some(old) = &existing {
            check_replacement(old, &columns)?;
        }
        let id = match &existing {
            Some(old) => old.id,
            None => {
                let engine = Arc::clone(&self.db.engine);
                super::run_blocking(|| engine.reserve_relation_id())?
            }
        };
        let def = ViewDef {
            id,
            name: name.clone(),
            columns,
            query: cv.query.to_string(),
            depends_on,
            owner: existing
                .as_ref()
                .map_or_else(|| Some(self.user.clone()), |o| o.owner.clone()),
            // OR REPLACE keeps the grants, as in PostgreSQL
            acl: existing.as_ref().map(|o| o.acl.clone()).unwrap_or_default(),
            comment: existing.as_ref().and_then(|o| o.comment.clone()),
            version: 0,
        };
        self.change_view(&name, Some(def))?;
        Ok(Output::Command("CREATE VIEW".into()))
    }

    /// `DROP VIEW [IF EXISTS] names [CASCADE]`.
    pub(super) fn drop_views(
        &mut self,
        names: &[ObjectName],
        if_exists: bool,
        cascade: bool,
    ) -> Result<Output> {
        let mut dropping: Vec<String> = Vec::new();
        for n in names {
            let name = table_name(n)?;
            match self.view(&name) {
                Some(v) => {
                    self.check_view_owner(&v)?;
                    dropping.push(name);
                }
                None if self.table(&name).is_ok() => {
                    return Err(SqlError::WrongObjectType(format!(
                        "\"{name}\" is not a view\nHINT:  Use DROP TABLE to remove a table."
                    )))
                }
                None if if_exists => {
                    self.notice(
                        "00000",
                        &format!("view \"{name}\" does not exist, skipping"),
                    );
                }
                None => {
                    return Err(SqlError::UndefinedRelation(format!(
                        "view \"{name}\" does not exist"
                    )))
                }
            }
        }
        let extra = self.dependent_views(&dropping, "view", cascade)?;
        self.cascade_notice(&extra);
        for name in dropping.iter().chain(&extra) {
            self.change_view(name, None)?;
        }
        Ok(Output::Command("DROP VIEW".into()))
    }

    /// PostgreSQL's NOTICE naming the views a DROP ... CASCADE drops too.
    pub(super) fn cascade_notice(&mut self, views: &[String]) {
        match views {
            [] => {}
            [one] => self.notice("00000", &format!("drop cascades to view {one}")),
            many => {
                let detail: Vec<String> = many
                    .iter()
                    .map(|v| format!("drop cascades to view {v}"))
                    .collect();
                self.notice_with_detail(
                    "00000",
                    &format!("drop cascades to {} other objects", many.len()),
                    &detail.join("\n"),
                );
            }
        }
    }

    /// The views (outside `dropping`) that read any of `dropping`,
    /// directly or through other views: 2BP01 unless `cascade`, else
    /// returned (to be dropped too). `kind` names what is dropped.
    pub(super) fn dependent_views(
        &self,
        dropping: &[String],
        kind: &str,
        cascade: bool,
    ) -> Result<Vec<String>> {
        if !self.sees_views() {
            return Ok(Vec::new());
        }
        let views = self.visible_views();
        let mut gone: Vec<String> = dropping.to_vec();
        let mut extra: Vec<String> = Vec::new();
        let mut details: Vec<String> = Vec::new();
        loop {
            let mut grew = false;
            for v in &views {
                if gone.contains(&v.name) {
                    continue;
                }
                if let Some(on) = v.depends_on.iter().find(|d| gone.contains(d)) {
                    let on_kind = if dropping.contains(on) { kind } else { "view" };
                    details.push(format!("view {} depends on {on_kind} {on}", v.name));
                    gone.push(v.name.clone());
                    extra.push(v.name.clone());
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        if extra.is_empty() || cascade {
            for v in &extra {
                if let Some(def) = self.view(v) {
                    self.check_view_owner(&def)?;
                }
            }
            return Ok(extra);
        }
        let first = dropping.first().cloned().unwrap_or_default();
        Err(SqlError::DependentObjects(format!(
            "cannot drop {kind} {first} because other objects depend on it"
        ))
        .with_detail(format!(
            "{}\nHINT:  Use DROP ... CASCADE to drop the dependent objects too.",
            details.join("\n")
        )))
    }

    /// Drops the views `extra` (found by [`Session::dependent_views`]
    /// with CASCADE) in this transaction.
    pub(super) fn drop_views_cascaded(&mut self, extra: &[String]) -> Result<()> {
        for v in extra {
            self.change_view(v, None)?;
        }
        Ok(())
    }

    /// Refuses an ALTER TABLE operation that would break a view reading
    /// `table` (see the module doc).
    pub(super) fn check_alter_under_views(
        &self,
        table: &str,
        op: &AlterTableOperation,
    ) -> Result<()> {
        if !self.sees_views() {
            return Ok(());
        }
        let readers: Vec<ViewDef> = self
            .visible_views()
            .into_iter()
            .filter(|v| v.depends_on.iter().any(|d| d == table))
            .collect();
        let Some(first) = readers.first() else {
            return Ok(());
        };
        // the views that may read the column `c` (`views::may_read_column`)
        let reading = |c: &Ident| -> Vec<&ViewDef> {
            let c = ident_name(c);
            readers
                .iter()
                .filter(|v| crate::views::may_read_column(&v.query, &c))
                .collect()
        };
        let what = match op {
            AlterTableOperation::RenameTable { .. } => "rename",
            AlterTableOperation::RenameColumn {
                old_column_name, ..
            } => {
                if reading(old_column_name).is_empty() {
                    return Ok(());
                }
                "rename a column of"
            }
            AlterTableOperation::DropColumn {
                column_names,
                drop_behavior,
                ..
            } => {
                let Some((column, views)) = column_names
                    .iter()
                    .map(|c| (ident_name(c), reading(c)))
                    .find(|(_, views)| !views.is_empty())
                else {
                    return Ok(());
                };
                if !matches!(drop_behavior, Some(DropBehavior::Cascade)) {
                    // PostgreSQL's answer without CASCADE
                    let detail: Vec<String> = views
                        .iter()
                        .map(|v| {
                            format!(
                                "view {} depends on column {column} of table {table}",
                                v.name
                            )
                        })
                        .collect();
                    return Err(SqlError::DependentObjects(format!(
                        "cannot drop column {column} of table {table} because other objects depend on it"
                    ))
                    .with_detail(detail.join("\n")));
                }
                "drop a column a view reads with CASCADE from"
            }
            AlterTableOperation::AlterColumn {
                column_name,
                op: datafusion::sql::sqlparser::ast::AlterColumnOperation::SetDataType { .. },
            } => {
                if reading(column_name).is_empty() {
                    return Ok(());
                }
                "change a column type of"
            }
            AlterTableOperation::AddColumn { .. } => {
                let star = readers.iter().find(|v| {
                    crate::views::parse_query(&v.query)
                        .map_or(true, |q| crate::views::has_wildcard(&q))
                });
                match star {
                    Some(v) => {
                        return Err(SqlError::FeatureNotSupported(format!(
                            "cannot add a column to table {table}: view {} reads it with *\nHINT:  Drop the view first, or name its columns.",
                            v.name
                        )))
                    }
                    None => return Ok(()),
                }
            }
            _ => return Ok(()),
        };
        Err(SqlError::FeatureNotSupported(format!(
            "cannot {what} table {table} while view {} reads it (Eddy's views name their tables and columns by name)\nHINT:  Drop the view first, then create it again.",
            first.name
        )))
    }

    /// Records a change of view `name` in this statement's transaction.
    pub(super) fn change_view(&mut self, name: &str, new: Option<ViewDef>) -> Result<()> {
        let base_version = self.db.engine.view(name).map(|v| v.version);
        let t = self
            .txn
            .as_mut()
            .ok_or_else(|| SqlError::Internal("a view change outside a transaction".into()))?;
        t.view_changes.push(ViewChange {
            name: name.to_string(),
            base_version,
            new,
        });
        Ok(())
    }

    pub(super) fn check_view_owner(&self, v: &ViewDef) -> Result<()> {
        let roles = &self.db.roles;
        if roles.privileges_of(&self.user).superuser {
            return Ok(());
        }
        let owner = v
            .owner
            .as_deref()
            .unwrap_or(crate::roles::BOOTSTRAP_SUPERUSER);
        if roles.effective_roles(&self.user).contains(owner) {
            return Ok(());
        }
        Err(SqlError::InsufficientPrivilege(format!(
            "must be owner of view {}",
            v.name
        )))
    }

    /// The tables and views `query` reads (not catalog relations).
    fn relations_of(&self, query: &datafusion::sql::sqlparser::ast::Query) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for n in crate::views::relations_read(query) {
            if crate::temp_tables::is_reserved(&n) {
                return Err(SqlError::FeatureNotSupported(
                    "views over temporary tables are not supported".into(),
                ));
            }
            if self.table(&n).is_ok() || self.view(&n).is_some() {
                out.push(n);
            }
        }
        Ok(out)
    }

    /// The view's columns: the query planned (its views expanded), named
    /// as a SELECT's result columns are, renamed by the column list.
    async fn view_columns(&self, cv: &CreateView) -> Result<Vec<ViewColumn>> {
        let mut stmt = Statement::Query(cv.query.clone());
        crate::views::expand(&mut stmt, &|n| self.view(n))?;
        self.compat(&mut stmt)?;
        let state = self.planning_state();
        let plan = state
            .statement_to_plan(DFStatement::Statement(Box::new(stmt)))
            .await?;
        // the result types a SELECT of it would have (Eddy's analyzer
        // rules narrow and align them: `crate::result_types`)
        let plan = state.optimize(&plan)?;
        let schema = plan.schema().as_arrow().clone();
        if cv.columns.len() > schema.fields().len() {
            return Err(SqlError::SyntaxMessage(
                "CREATE VIEW specifies more column names than columns".into(),
            ));
        }
        let mut columns: Vec<ViewColumn> = Vec::with_capacity(schema.fields().len());
        for (k, f) in schema.fields().iter().enumerate() {
            let name = match cv.columns.get(k) {
                Some(c) => ident_name(&c.name),
                None => crate::output_names::visible(f.name()).to_string(),
            };
            if columns.iter().any(|c| c.name == name) {
                return Err(SqlError::DuplicateColumn(name));
            }
            columns.push(ViewColumn {
                name,
                type_oid: crate::pgtypes::field_oid(f),
                // a declared length (varchar(n), char(n)) passes through
                typmod: crate::pgtypes::declared_type(f).map_or(-1, crate::catalog::typmod_of),
            });
        }
        Ok(columns)
    }
}

/// OR REPLACE keeps every existing column (name and type, in order).
fn check_replacement(old: &ViewDef, new: &[ViewColumn]) -> Result<()> {
    if new.len() < old.columns.len() {
        return Err(SqlError::InvalidDefinition(
            "cannot drop columns from view".into(),
        ));
    }
    for (o, n) in old.columns.iter().zip(new) {
        if o.name != n.name {
            return Err(SqlError::InvalidDefinition(format!(
                "cannot change name of view column \"{}\" to \"{}\"",
                o.name, n.name
            )));
        }
        if o.type_oid != n.type_oid {
            return Err(SqlError::InvalidDefinition(format!(
                "cannot change data type of view column \"{}\"",
                o.name
            )));
        }
    }
    Ok(())
}

/// What CREATE VIEW accepts from sqlparser's superset of dialects.
fn refuse_view_options(cv: &CreateView) -> Result<()> {
    let unsupported = |what: &str| {
        Err(SqlError::FeatureNotSupported(format!(
            "CREATE VIEW with {what} is not supported"
        )))
    };
    if cv.materialized {
        return unsupported("MATERIALIZED outside the stream layer");
    }
    if cv.temporary {
        return Err(SqlError::FeatureNotSupported(
            "temporary views are not supported".into(),
        ));
    }
    if cv.or_alter || cv.secure || cv.copy_grants || cv.with_no_schema_binding {
        return Err(SqlError::SyntaxMessage(format!(
            "syntax error at or near \"{}\"",
            cv.name
        )));
    }
    if cv.if_not_exists {
        return Err(SqlError::SyntaxMessage(
            "syntax error at or near \"NOT\"".into(),
        ));
    }
    if !matches!(cv.options, CreateTableOptions::None) {
        return unsupported("options (WITH CHECK OPTION, security_barrier, ...)");
    }
    if !cv.cluster_by.is_empty() || cv.comment.is_some() || cv.to.is_some() || cv.params.is_some() {
        return Err(SqlError::SyntaxMessage(format!(
            "syntax error at or near \"{}\"",
            cv.name
        )));
    }
    Ok(())
}
