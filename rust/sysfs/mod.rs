// SPDX-License-Identifier: GPL-2.0

//! Read-only sysfs directories, for `/sys/kernel/svcrdma_rs/`.
//!
//! A [`Dir<T>`] is a kobject embedded with its data `T`; each attribute file
//! shows one value of `T`, one value per file, newline-terminated. Dropping
//! the `Dir` removes the directory; the memory is freed by the kobject's
//! release once sysfs has no reader left, so a `show` never outlives it.
//!
//! The attribute tables are `static`s made by [`sysfs_attrs!`].

use core::{fmt, marker::PhantomData, ptr::NonNull};

use kernel::{page::PAGE_SIZE, prelude::*, types::Opaque};

use crate::bindings;

/// What a directory shows.
pub(crate) trait Attrs: Send + Sync + Sized + 'static {
    /// The files, in order: name, and how to write the value (without the
    /// trailing newline).
    const FILES: &'static [(&'static CStr, ShowFn<Self>)];
    /// The directory type: implement as `sysfs_ktype!(Self)`.
    fn ktype() -> &'static KType<Self>;
}

/// Writes one attribute's value.
pub(crate) type ShowFn<T> = fn(&T, &mut dyn fmt::Write) -> fmt::Result;

/// The most files a directory type may have.
pub(crate) const MAX_FILES: usize = 24;

/// A directory type's attributes (see [`sysfs_ktype!`]).
#[repr(transparent)]
pub(crate) struct AttrTable([bindings::kobj_attribute; MAX_FILES]);
// SAFETY: immutable `static` data the kernel only reads.
unsafe impl Sync for AttrTable {}

impl AttrTable {
    /// The attributes of `T::FILES`, all read-only, shown by [`show::<T>`].
    pub(crate) const fn new<T: Attrs>() -> Self {
        assert!(T::FILES.len() <= MAX_FILES);
        let mut a = [const {
            // SAFETY: all-zero is a valid `kobj_attribute` (no name, no ops).
            unsafe { core::mem::zeroed::<bindings::kobj_attribute>() }
        }; MAX_FILES];
        let mut i = 0;
        while i < T::FILES.len() {
            a[i].attr.name = kernel::str::as_char_ptr_in_const_context(T::FILES[i].0).cast();
            a[i].attr.mode = 0o444;
            a[i].__bindgen_anon_1.show = Some(show::<T>);
            i += 1;
        }
        Self(a)
    }
}

/// The NULL-terminated attribute list of an [`AttrTable`].
#[repr(transparent)]
pub(crate) struct AttrPtrs([*mut bindings::attribute; MAX_FILES + 1]);
// SAFETY: immutable `static` data the kernel only reads.
unsafe impl Sync for AttrPtrs {}

impl AttrPtrs {
    /// Points at the first `n` attributes of `t`.
    pub(crate) const fn new(t: &'static AttrTable, n: usize) -> Self {
        let mut p = [core::ptr::null_mut(); MAX_FILES + 1];
        let mut i = 0;
        while i < n {
            p[i] = (&raw const t.0[i].attr).cast_mut();
            i += 1;
        }
        Self(p)
    }
}

/// An attribute group and the NULL-terminated list holding it.
pub(crate) struct Groups {
    group: bindings::attribute_group,
}
// SAFETY: immutable `static` data the kernel only reads.
unsafe impl Sync for Groups {}

impl Groups {
    /// One unnamed group of the attributes `p`.
    pub(crate) const fn new(p: &'static AttrPtrs) -> Self {
        // SAFETY: all-zero is a valid `attribute_group`.
        let mut group: bindings::attribute_group = unsafe { core::mem::zeroed() };
        group.__bindgen_anon_2.attrs = (&raw const p.0)
            .cast::<*mut bindings::attribute>()
            .cast_mut();
        Self { group }
    }
}

/// The NULL-terminated group list of a `kobj_type`.
#[repr(transparent)]
pub(crate) struct GroupList([*const bindings::attribute_group; 2]);
// SAFETY: immutable `static` data the kernel only reads.
unsafe impl Sync for GroupList {}

impl GroupList {
    /// The list `[g, NULL]`.
    pub(crate) const fn new(g: &'static Groups) -> Self {
        Self([&raw const g.group, core::ptr::null()])
    }
}

/// A `kobj_type` for directories holding `T`.
pub(crate) struct KType<T> {
    ktype: bindings::kobj_type,
    attrs: *const bindings::kobj_attribute,
    _t: PhantomData<T>,
}

// SAFETY: immutable `static` data the kernel only reads.
unsafe impl<T> Sync for KType<T> {}

impl<T: Attrs> KType<T> {
    /// The type whose files are `attrs`, grouped by `groups`.
    pub(crate) const fn new(attrs: &'static AttrTable, groups: &'static GroupList) -> Self {
        Self {
            ktype: bindings::kobj_type {
                release: Some(release::<T>),
                sysfs_ops: &raw const bindings::kobj_sysfs_ops,
                default_groups: (&raw const groups.0)
                    .cast::<*const bindings::attribute_group>()
                    .cast_mut(),
                child_ns_type: None,
                namespace: None,
                get_ownership: None,
            },
            attrs: (&raw const attrs.0).cast(),
            _t: PhantomData,
        }
    }
}

/// The directory type of an [`Attrs`] type: `fn ktype() { sysfs_ktype!(Self) }`.
macro_rules! sysfs_ktype {
    ($t:ty) => {{
        use $crate::sysfs::{AttrPtrs, AttrTable, Attrs, GroupList, Groups, KType};
        static ATTRS: AttrTable = AttrTable::new::<$t>();
        static PTRS: AttrPtrs = AttrPtrs::new(&ATTRS, <$t as Attrs>::FILES.len());
        static GROUP: Groups = Groups::new(&PTRS);
        static GROUPS: GroupList = GroupList::new(&GROUP);
        static KT: KType<$t> = KType::new(&ATTRS, &GROUPS);
        &KT
    }};
}
pub(crate) use sysfs_ktype;

/// A directory and its data, as the kernel sees it.
#[repr(C)]
struct Node<T> {
    kobj: Opaque<bindings::kobject>,
    data: T,
}

/// A sysfs directory showing `T`; dropping it removes the directory.
///
/// # Invariants
///
/// `node` was leaked from a `KBox<Node<T>>`, its kobject is initialized and
/// added with `T::ktype()`, and this value owns one reference to it.
pub(crate) struct Dir<T: Attrs> {
    node: NonNull<Node<T>>,
}

// SAFETY: `Dir` only gives shared access to `T`, which is `Send + Sync`;
// kobject operations are thread-safe.
unsafe impl<T: Attrs> Send for Dir<T> {}
// SAFETY: as above.
unsafe impl<T: Attrs> Sync for Dir<T> {}

impl<T: Attrs> Dir<T> {
    /// Creates directory `name` under `parent`, showing `data`.
    pub(crate) fn new(parent: &Parent, name: &CStr, data: T) -> Result<Self> {
        Self::under(parent.kobj.as_ptr(), name, data)
    }

    /// Creates directory `name` under this one, showing `data`. Drop it
    /// before this one.
    pub(crate) fn child<U: Attrs>(&self, name: &CStr, data: U) -> Result<Dir<U>> {
        // SAFETY: the node is live while we hold a reference (invariant).
        Dir::under(unsafe { (*self.node.as_ptr()).kobj.get() }, name, data)
    }

    /// Creates directory `name` under the live kobject `parent`.
    fn under(parent: *mut bindings::kobject, name: &CStr, data: T) -> Result<Self> {
        let node = KBox::new(
            Node {
                kobj: Opaque::zeroed(),
                data,
            },
            GFP_KERNEL,
        )?;
        let node = KBox::into_raw(node);
        // `ktype` is a static of the right type; "%s" consumes one C string;
        // `parent` is live (a `Parent`'s or a live `Dir`'s kobject).
        // SAFETY: `node` is live and its kobject zeroed, as the API requires.
        let ret = unsafe {
            bindings::kobject_init_and_add(
                (*node).kobj.get(),
                (&raw const T::ktype().ktype).cast_mut(),
                parent,
                c"%s".as_char_ptr(),
                name.as_char_ptr(),
            )
        };
        if ret != 0 {
            // After `kobject_init_and_add()`, even failed, the kobject must
            // be released with `kobject_put()`; its release frees `node`.
            // SAFETY: `node` is live and its kobject initialised (just above).
            unsafe { bindings::kobject_put((*node).kobj.get()) };
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: initialized and added; we hold the initial reference.
        Ok(Self {
            // SAFETY: `KBox::into_raw` never returns null.
            node: unsafe { NonNull::new_unchecked(node) },
        })
    }

    /// The data shown.
    pub(crate) fn data(&self) -> &T {
        // SAFETY: the node is live while we hold a reference (invariant).
        unsafe { &(*self.node.as_ptr()).data }
    }
}

impl<T: Attrs> Drop for Dir<T> {
    fn drop(&mut self) {
        // `kobject_del()` removes the files (waiting for running `show`s);
        // the put drops our reference, and the release frees the node.
        // SAFETY: the kobject is added and we own a reference (invariant).
        unsafe {
            let kobj = (*self.node.as_ptr()).kobj.get();
            bindings::kobject_del(kobj);
            bindings::kobject_put(kobj);
        }
    }
}

/// The kobject release of a `Node<T>`: frees it.
///
/// # Safety
///
/// Called by the kobject core only, with the kobject of a `Node<T>` whose
/// last reference was just put.
unsafe extern "C" fn release<T: Attrs>(kobj: *mut bindings::kobject) {
    let kobj = kobj.cast::<Opaque<bindings::kobject>>();
    // SAFETY: every kobject of this type is the `kobj` field of a `Node<T>`
    // leaked from a `KBox` in `Dir::new`, and this is its last reference.
    unsafe { drop(KBox::from_raw(kernel::container_of!(kobj, Node<T>, kobj))) };
}

/// The `show` of every attribute of a `T` directory.
///
/// # Safety
///
/// Called by sysfs only, for an attribute of `T::ktype()`'s table on a
/// `Node<T>` kobject, with a `PAGE_SIZE` buffer.
pub(crate) unsafe extern "C" fn show<T: Attrs>(
    kobj: *mut bindings::kobject,
    attr: *mut bindings::kobj_attribute,
    buf: *mut c_char,
) -> isize {
    let kobj = kobj.cast::<Opaque<bindings::kobject>>();
    // SAFETY: as in `release`; sysfs holds the kobject during `show`.
    let node = unsafe { &*kernel::container_of!(kobj, Node<T>, kobj) };
    // SAFETY: `attr` is an element of the table `attrs` points to.
    let index = unsafe { attr.offset_from(T::ktype().attrs) };
    let Ok(index) = usize::try_from(index) else {
        return EINVAL.to_errno() as isize;
    };
    // SAFETY: sysfs gives `show` a zeroed, writable page.
    let page = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), PAGE_SIZE) };
    let mut w = PageWriter::new(page);
    let Some((_, f)) = T::FILES.get(index) else {
        return EINVAL.to_errno() as isize;
    };
    if f(&node.data, &mut w).is_err() || fmt::Write::write_str(&mut w, "\n").is_err() {
        return EOVERFLOW.to_errno() as isize;
    }
    w.len() as isize
}

/// Formats into a sysfs page, refusing to overflow it.
pub(crate) struct PageWriter<'a> {
    page: &'a mut [u8],
    len: usize,
}

impl<'a> PageWriter<'a> {
    /// Writes from the start of `page`.
    pub(crate) fn new(page: &'a mut [u8]) -> Self {
        Self { page, len: 0 }
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl fmt::Write for PageWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        // Keep the last byte for the terminating NUL sysfs expects.
        if end >= self.page.len() {
            return Err(fmt::Error);
        }
        self.page[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// A plain directory (`kobject_create_and_add()`), parent of `Dir`s.
pub(crate) struct Parent {
    kobj: NonNull<bindings::kobject>,
}

// SAFETY: kobject operations are thread-safe; `Parent` has no other state.
unsafe impl Send for Parent {}
// SAFETY: as above.
unsafe impl Sync for Parent {}

impl Parent {
    /// Creates `/sys/kernel/<name>`.
    pub(crate) fn under_kernel(name: &CStr) -> Result<Self> {
        // SAFETY: `kernel_kobj` is the live `/sys/kernel` kobject.
        Self::create(name, unsafe { bindings::kernel_kobj })
    }

    /// Creates `<self>/<name>`.
    pub(crate) fn child(&self, name: &CStr) -> Result<Self> {
        Self::create(name, self.kobj.as_ptr())
    }

    fn create(name: &CStr, parent: *mut bindings::kobject) -> Result<Self> {
        // SAFETY: `name` is a C string, `parent` a live kobject.
        let kobj = unsafe { bindings::kobject_create_and_add(name.as_char_ptr(), parent) };
        NonNull::new(kobj).map(|kobj| Self { kobj }).ok_or(ENOMEM)
    }
}

impl Drop for Parent {
    fn drop(&mut self) {
        // SAFETY: we own the only reference `kobject_create_and_add()` gave.
        unsafe { bindings::kobject_put(self.kobj.as_ptr()) };
    }
}
